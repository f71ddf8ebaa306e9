import { readFileSync } from "node:fs";
import type { ListenerTls } from "../framing/http/dual-protocol-listener.js";
import type { TlsOptions } from "./tls-options.js";

/** readOptionFile reads a file an option names, or throws naming the file and what it is for (`what`, e.g. "TLS file"). */
export function readOptionFile(file: string, what: string): Buffer {
  try {
    return readFileSync(file);
  } catch (error) {
    throw new Error(`cannot read the ${what} ${file}: ${(error as Error).message}`);
  }
}

/** tlsOf reads the TLS files of the options; undefined without --tls-cert. Throws naming a file it cannot read. */
export function tlsOf(options: TlsOptions): ListenerTls | undefined {
  if (options.tlsCert === "") return undefined;
  const read = (file: string) => readOptionFile(file, "TLS file");
  return { cert: read(options.tlsCert), key: read(options.tlsKey), clientCa: options.tlsClientCa === "" ? undefined : read(options.tlsClientCa) };
}
