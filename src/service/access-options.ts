import type { NameOf, OptionsOf } from "../core/index.js";
import { optionTable } from "../core/index.js";

/** ACCESS_OPTIONS name the token files that decide who may call (AccessPolicy). */
export const ACCESS_OPTIONS = optionTable({
  authTokenFile: {
    flag: "auth-token-file",
    kind: "string",
    default: "",
    help: "file of tokens (one per line) that every call needs; re-read on SIGHUP",
  },
  adminTokenFile: {
    flag: "admin-token-file",
    kind: "string",
    default: "",
    help: "file of tokens that Clear, DeleteKeys, DropRank, ResetNamespace and the JSON clear/delete/drop/reset routes need (they may do everything); re-read on SIGHUP",
  },
  clearTokenFile: {
    flag: "clear-token-file",
    kind: "string",
    default: "",
    help: "file of tokens that may make every worker call and Clear, DeleteKeys and the JSON clear/delete routes, but not DropRank or ResetNamespace (for a relay that passes engines' clear on); re-read on SIGHUP",
  },
  metricsAuth: { flag: "metrics-auth", kind: "boolean", default: false, help: "GET /metrics needs a token too" },
});

/** AccessOptions name the token files (ACCESS_OPTIONS). */
export type AccessOptions = OptionsOf<typeof ACCESS_OPTIONS>;

/** checkAccess throws unless the access options go together. */
export function checkAccess(options: AccessOptions, name: NameOf): void {
  // Without admin tokens the admin calls are open to every caller a worker file admits: a grant short of admin means nothing then.
  if (options.clearTokenFile !== "" && options.adminTokenFile === "") {
    throw new RangeError(`${name("clearTokenFile")} needs ${name("adminTokenFile")}: without admin tokens, every caller may make every admin call`);
  }
  if (options.metricsAuth && !hasTokens(options)) {
    throw new RangeError(`${name("metricsAuth")} needs ${name("authTokenFile")}, ${name("adminTokenFile")} or ${name("clearTokenFile")}`);
  }
}

/** hasTokens tells whether any token file is given: then calls need tokens as the files say. */
export function hasTokens(options: AccessOptions): boolean {
  return options.authTokenFile !== "" || options.adminTokenFile !== "" || options.clearTokenFile !== "";
}
