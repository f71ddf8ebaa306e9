import type { StateOptions } from "../../core/options.js";
import { type NameOf, namespaceProblem, type OptionsOf, optionTable } from "../../core/options.js";

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
  const problem = namespaceProblem(options.vllmNamespace, options.maxKeyBytes);
  if (problem !== undefined) throw new RangeError(`${name("vllmNamespace")}: ${problem}`);
  if (options.vllmWorldSize > options.maxRanksPerNamespace) {
    throw new RangeError(
      `${name("vllmWorldSize")} must be at most ${name("maxRanksPerNamespace")} (${options.maxRanksPerNamespace}), got ${options.vllmWorldSize}`,
    );
  }
}
