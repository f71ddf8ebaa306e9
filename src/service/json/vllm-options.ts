import type { StateOptions } from "../../core/index.js";
import { type NameOf, namespaceName, type OptionsOf, optionTable } from "../../core/index.js";

/** VLLM_OPTIONS shape the namespaces vLLM's routes create (vllm-routes.ts). */
export const VLLM_OPTIONS = optionTable({
  vllmWorldSize: {
    kind: "integer",
    default: 0,
  },
  vllmNamespace: {
    kind: "string",
    default: "",
  },
});

/** VllmOptions shape the namespaces vLLM's routes create (VLLM_OPTIONS). */
export type VllmOptions = OptionsOf<typeof VLLM_OPTIONS>;

/** checkVllm throws unless the declared world size fits the ranks a namespace may have, and the namespace is one the core takes. */
export function checkVllm(options: VllmOptions & StateOptions, name: NameOf): void {
  try {
    namespaceName(options.vllmNamespace, options);
  } catch (error) {
    throw new RangeError(`${name("vllmNamespace")}: ${(error as Error).message}`);
  }
  if (options.vllmWorldSize > options.maxRanksPerNamespace) {
    throw new RangeError(
      `${name("vllmWorldSize")} must be at most ${name("maxRanksPerNamespace")} (${options.maxRanksPerNamespace}), got ${options.vllmWorldSize}`,
    );
  }
}
