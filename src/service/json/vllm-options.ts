import { type NameOf, type OptionsOf, optionTable } from "../../core/option-table.js";
import type { StateOptions } from "../../core/state-options.js";

/** VLLM_OPTIONS shape the namespaces vLLM's routes create (vllm-routes.ts). */
export const VLLM_OPTIONS = optionTable({
  vllmWorldSize: {
    flag: "vllm-world-size",
    kind: "integer",
    default: 0,
    help: "world_size of the namespaces vLLM's routes create (its tensor-parallel size): a rank at or above it is refused; 0: every rank initialized counts",
  },
});

/** VllmOptions shape the namespaces vLLM's routes create (VLLM_OPTIONS). */
export type VllmOptions = OptionsOf<typeof VLLM_OPTIONS>;

/** checkVllm throws unless the declared world size fits the ranks a namespace may have. */
export function checkVllm(options: VllmOptions & StateOptions, name: NameOf): void {
  if (options.vllmWorldSize > options.maxRanksPerNamespace) {
    throw new RangeError(
      `${name("vllmWorldSize")} must be at most ${name("maxRanksPerNamespace")} (${options.maxRanksPerNamespace}), got ${options.vllmWorldSize}`,
    );
  }
}
