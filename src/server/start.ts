import type { Logger } from "./logger.js";
import type { ServerOptions } from "./serve-options.js";
import type { ServerConfig } from "./server.js";
import type { EarlyPort } from "./transport/early-port.js";

/**
 * Start is what the serve command hands the server it starts (serve-node.ts
 * or serve-member.ts): the options, the security files read, the port
 * bound, the stop signal awaited.
 */
export interface Start {
  options: ServerOptions;
  security: Pick<ServerConfig, "access" | "tls">;
  port: EarlyPort;
  stopped: Promise<NodeJS.Signals>;
  logger: Logger;
}
