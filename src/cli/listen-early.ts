import { EarlyPort } from "../framing/http/early-port.js";
import type { ListenerOptions } from "../framing/http/listener-options.js";
import type { Logger } from "../server/logger.js";
import { serverUrl } from "../server/server-url.js";
import type { TlsOptions } from "../server/tls-options.js";
import type { AccessOptions } from "../service/access-options.js";
import { systemdSocket } from "./systemd-socket.js";

/** PORT_IN_USE is what a starting process logs while another holds its port: the one it replaces, which frees it or hands it over as it stops. */
export const PORT_IN_USE = "the port is in use; waiting for it (the process that holds it frees it, or hands it over, as it stops)";

/**
 * listenEarly binds a listening command's port before the rest of it
 * loads (from then on a client's connection waits rather than being
 * refused), or takes the socket systemd passed it (socket activation: its
 * port must be --port's, unless that is 0), and logs "listening", after a
 * warning when it listens beyond loopback without tokens or TLS;
 * undefined, with the reason on stderr, when it cannot listen.
 */
export async function listenEarly(
  command: string,
  options: Pick<ListenerOptions, "host" | "port" | "maxConnections" | "portWaitMs"> & AccessOptions & TlsOptions,
  logger: Logger,
): Promise<EarlyPort | undefined> {
  let port: EarlyPort;
  let fd: number | undefined;
  try {
    fd = systemdSocket(process.env, process.pid);
    port =
      fd === undefined
        ? await EarlyPort.bind(options.host, options.port, options.maxConnections, options.portWaitMs, () =>
            logger.warn({ port: options.port, waitMs: options.portWaitMs }, PORT_IN_USE),
          )
        : await EarlyPort.adopt(fd, options.maxConnections);
  } catch (error) {
    const where = fd === undefined ? `on ${options.host}:${options.port}` : "on the socket systemd passed";
    console.error(`hf3fs-metadata ${command}: cannot listen ${where}: ${(error as Error).message}`);
    return undefined;
  }
  if (fd !== undefined && options.port !== 0 && port.port !== options.port) {
    console.error(
      `hf3fs-metadata ${command}: the socket systemd passed listens on port ${port.port}, and --port is ${options.port}: make the socket unit's ListenStream= and --port name one port`,
    );
    await port.close();
    return undefined;
  }
  // The address systemd's socket listens on is its unit's, whatever --host says.
  const host = fd === undefined ? options.host : port.host;
  warnIfExposed({ ...options, host }, logger);
  logger.info({ url: serverUrl(host, port.port, options.tlsCert !== ""), pid: process.pid, ...(fd === undefined ? {} : { socket: "systemd" }) }, "listening");
  return port;
}

/** warnIfExposed logs a warning when a command listens beyond loopback without tokens or without TLS. */
function warnIfExposed(options: { host: string } & AccessOptions & TlsOptions, logger: Logger): void {
  if (isLoopback(options.host) || (options.authTokenFile !== "" && options.tlsCert !== "")) return;
  const missing = [
    options.authTokenFile === "" ? "without --auth-token-file (anyone who reaches the port may call it)" : "",
    options.tlsCert === "" ? "without TLS (tokens and keys cross the network in clear)" : "",
  ].filter((m) => m !== "");
  logger.warn({ host: options.host }, `listening beyond loopback ${missing.join(" and ")}`);
}

function isLoopback(host: string): boolean {
  return host === "localhost" || host === "::1" || host.startsWith("127.");
}
