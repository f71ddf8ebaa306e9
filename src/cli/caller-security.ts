import type { ListenerTls } from "../framing/http/dual-protocol-listener.js";
import { readOptionFile, tlsOf } from "../server/tls-files.js";
import type { TlsOptions } from "../server/tls-options.js";
import { type AccessOptions, hasTokens } from "../service/access-options.js";
import type { AccessPolicy } from "../service/access-policy.js";
import { type AccessFiles, type AccessTokens, readAccessTokens } from "../service/token-file.js";

export { readOptionFile };

/** CallerSecurity is what a listening command (serve, relay) asks of its callers: tokens and TLS. */
export interface CallerSecurity {
  readonly access?: AccessPolicy;
  readonly tls?: ListenerTls;
}

/** CallerFiles are the TLS and token files of the options, read. */
export interface CallerFiles {
  readonly tls?: ListenerTls;
  readonly tokens?: { readonly files: AccessFiles; readonly read: AccessTokens };
}

/**
 * callerFilesOf reads the TLS and token files of the options (throws naming
 * a file that cannot be read, or a token file that holds no token), before
 * a command binds its port: a start that would fail on them fails before it
 * takes the port over from the process it replaces.
 */
export function callerFilesOf(options: AccessOptions & TlsOptions): CallerFiles {
  if (!hasTokens(options)) return { tls: tlsOf(options) };
  const file = (name: string) => (name === "" ? undefined : name);
  const files = { workerTokenFile: file(options.authTokenFile), adminTokenFile: file(options.adminTokenFile), clearTokenFile: file(options.clearTokenFile) };
  return { tls: tlsOf(options), tokens: { files, read: readAccessTokens(files) } };
}

/**
 * callerSecurityOf builds the access policy of the tokens read, once the
 * port is bound: the policy's module (and the core's errors, with the
 * generated code) loads only then.
 */
export async function callerSecurityOf({ tls, tokens }: CallerFiles): Promise<CallerSecurity> {
  if (tokens === undefined) return { tls };
  const { AccessPolicy } = await import("../service/access-policy.js");
  return { tls, access: new AccessPolicy(tokens.files, tokens.read) };
}
