import type { ListenerTls } from "../framing/http/dual-protocol-listener.js";
import type { Logger } from "../server/logger.js";
import { readOptionFile, tlsOf } from "../server/tls-files.js";
import type { TlsOptions } from "../server/tls-options.js";
import { type AccessOptions, hasTokens } from "../service/access-options.js";
import { AccessPolicy } from "../service/access-policy.js";

export { readOptionFile };

/** CallerSecurity is what a listening command (serve, relay) asks of its callers: tokens and TLS. */
export interface CallerSecurity {
  readonly access?: AccessPolicy;
  readonly tls?: ListenerTls;
}

/** callerSecurityOf reads the token and TLS files of the options. Throws naming an unreadable or empty file. */
export function callerSecurityOf(options: AccessOptions & TlsOptions): CallerSecurity {
  return { access: accessPolicyOf(options), tls: tlsOf(options) };
}

/** accessPolicyOf builds the access policy of the token file options; undefined when none is given. */
function accessPolicyOf(options: AccessOptions): AccessPolicy | undefined {
  if (!hasTokens(options)) return undefined;
  const file = (name: string) => (name === "" ? undefined : name);
  return new AccessPolicy({
    workerTokenFile: file(options.authTokenFile),
    adminTokenFile: file(options.adminTokenFile),
    clearTokenFile: file(options.clearTokenFile),
  });
}

/** warnIfExposed logs a warning when a command listens beyond loopback without tokens or without TLS. */
export function warnIfExposed(options: { host: string } & AccessOptions & TlsOptions, logger: Logger): void {
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
