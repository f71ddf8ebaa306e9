import type { ListenerTls } from "../framing/http/dual-protocol-listener.js";
import { readOptionFile, tlsOf } from "../server/tls-files.js";
import type { TlsOptions } from "../server/tls-options.js";
import { type AccessOptions, hasTokens } from "../service/access-options.js";
import type { AccessPolicy } from "../service/access-policy.js";
import { readTokens } from "../service/token-file.js";

export { readOptionFile };

/** CallerSecurity is what a listening command (serve, relay) asks of its callers: tokens and TLS. */
export interface CallerSecurity {
  readonly access?: AccessPolicy;
  readonly tls?: ListenerTls;
}

/**
 * callerFilesOf reads the TLS files of the options and checks that each
 * token file can be read and holds a token (throws naming the file), before
 * a command binds its port: a start that would fail on them fails before it
 * takes the port over from the process it replaces.
 */
export function callerFilesOf(options: AccessOptions & TlsOptions): { tls?: ListenerTls } {
  for (const file of tokenFiles(options)) readTokens(file);
  return { tls: tlsOf(options) };
}

/**
 * callerSecurityOf adds the access policy of the token files to what
 * callerFilesOf read, once the port is bound: the policy's module (and the
 * core's errors, with the generated code) loads only then.
 */
export async function callerSecurityOf(options: AccessOptions, files: { tls?: ListenerTls }): Promise<CallerSecurity> {
  if (!hasTokens(options)) return files;
  const { AccessPolicy } = await import("../service/access-policy.js");
  const file = (name: string) => (name === "" ? undefined : name);
  const access = new AccessPolicy({
    workerTokenFile: file(options.authTokenFile),
    adminTokenFile: file(options.adminTokenFile),
    clearTokenFile: file(options.clearTokenFile),
  });
  return { ...files, access };
}

/** tokenFiles are the token files the options name. */
function tokenFiles(options: AccessOptions): string[] {
  return [options.authTokenFile, options.adminTokenFile, options.clearTokenFile].filter((f) => f !== "");
}
