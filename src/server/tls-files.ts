import { readFileSync } from "node:fs";
import type { ServerOptions } from "./options.js";
import type { ListenerTls } from "./transport/dual-protocol-listener.js";

/** tlsOf reads the TLS files of the options; undefined without --tls-cert. Throws naming a file it cannot read. */
export function tlsOf(options: ServerOptions): ListenerTls | undefined {
  if (options.tlsCert === "") return undefined;
  const read = (file: string) => {
    try {
      return readFileSync(file);
    } catch (error) {
      throw new Error(`cannot read the TLS file ${file}: ${(error as Error).message}`);
    }
  };
  return { cert: read(options.tlsCert), key: read(options.tlsKey), clientCa: options.tlsClientCa === "" ? undefined : read(options.tlsClientCa) };
}
