import type { NameOf, OptionsOf } from "../core/option-table.js";
import { optionTable } from "../core/option-table.js";

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
    help: "file of tokens that Clear, DeleteKeys, DropRank and the JSON clear/delete/drop routes need; re-read on SIGHUP",
  },
  metricsAuth: { flag: "metrics-auth", kind: "boolean", default: false, help: "GET /metrics needs a token too" },
});

/** AccessOptions name the token files (ACCESS_OPTIONS). */
export type AccessOptions = OptionsOf<typeof ACCESS_OPTIONS>;

/** checkAccess throws unless the access options go together. */
export function checkAccess(options: AccessOptions, name: NameOf): void {
  if (options.metricsAuth && options.authTokenFile === "" && options.adminTokenFile === "") {
    throw new RangeError(`${name("metricsAuth")} needs ${name("authTokenFile")} or ${name("adminTokenFile")}`);
  }
}
