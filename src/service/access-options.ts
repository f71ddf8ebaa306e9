import type { NameOf, OptionsOf } from "../core/options.js";
import { optionTable } from "../core/options.js";

/** ACCESS_OPTIONS name the token files that decide who may call (AccessPolicy). */
export const ACCESS_OPTIONS = optionTable({
  authTokenFile: {
    kind: "string",
    default: "",
  },
  adminTokenFile: {
    kind: "string",
    default: "",
  },
  clearTokenFile: {
    kind: "string",
    default: "",
  },
  metricsAuth: { kind: "boolean", default: false },
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
