import type { StateOptions } from "../../core/index.js";
import { type NameOf, namespaceName, type OptionsOf, optionTable } from "../../core/index.js";

/** VLLM_OPTIONS shape the namespaces vLLM's routes create (vllm-routes.ts). */
export const VLLM_OPTIONS = optionTable({
  vllmWorldSize: {
    flag: "vllm-world-size",
    kind: "integer",
    default: 0,
    help: "world_size of the namespaces vLLM's routes create (its tensor-parallel size): a rank at or above it is refused; 0: every rank initialized counts",
  },
  vllmNamespace: {
    flag: "vllm-namespace",
    kind: "string",
    default: "",
    defaultHelp: "kv, and vLLM's /clear clears every namespace",
    help: "the namespace of vLLM's calls (vLLM names none): one per model, so that models of other sizes share a server; vLLM's /clear and /reset then act on it alone. A body that names a namespace keeps it",
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
