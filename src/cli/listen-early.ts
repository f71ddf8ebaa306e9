import { EarlyPort } from "../framing/http/early-port.js";
import type { ListenerOptions } from "../framing/http/listener-options.js";
import type { Logger } from "../server/logger.js";
import { serverUrl } from "../server/server-url.js";
import type { TlsOptions } from "../server/tls-options.js";
import type { AccessOptions } from "../service/access-options.js";
import { warnIfExposed } from "./caller-security.js";

/** PORT_IN_USE is what a starting process logs while another holds its port: the one it replaces, which frees it or hands it over as it stops. */
export const PORT_IN_USE = "the port is in use; waiting for it (the process that holds it frees it, or hands it over, as it stops)";

/**
 * listenEarly binds a listening command's port before the rest of it
 * loads (from then on a client's connection waits rather than being
 * refused) and logs "listening", after a warning when it listens beyond
 * loopback without tokens or TLS; undefined, with the reason on stderr,
 * when the port cannot be bound.
 */
export async function listenEarly(
  command: string,
  options: Pick<ListenerOptions, "host" | "port" | "maxConnections" | "portWaitMs"> & AccessOptions & TlsOptions,
  logger: Logger,
): Promise<EarlyPort | undefined> {
  warnIfExposed(options, logger);
  let port: EarlyPort;
  try {
    port = await EarlyPort.bind(options.host, options.port, options.maxConnections, options.portWaitMs, () =>
      logger.warn({ port: options.port, waitMs: options.portWaitMs }, PORT_IN_USE),
    );
  } catch (error) {
    console.error(`hf3fs-metadata ${command}: cannot listen on ${options.host}:${options.port}: ${(error as Error).message}`);
    return undefined;
  }
  logger.info({ url: serverUrl(options.host, port.port, options.tlsCert !== ""), pid: process.pid }, "listening");
  return port;
}
