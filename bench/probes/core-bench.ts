import { keyListOf } from "../../src/core/key-list.js";
import { MetadataState } from "../../src/core/state.js";
import { benchKey } from "../harness/keys.js";

/** CoreResult is the page-operation rate of the core alone at one size and fill. */
export interface CoreResult {
  numPages: number;
  fill: number;
  pageOpsPerSec: number;
}

const BATCH = 64;

/**
 * coreRates measures one rank of numPages at each fill in turn (ascending):
 * it fills the rank up to the fill with reserved pages (held pages; cheaper
 * to make than confirmed keys, which matters at 10^7), then loops: allocate
 * 64 keys, confirm half, release the other half, delete the confirmed half
 * (so the fill stays put). Every allocation, confirmation, release and
 * deletion is one page operation. Run with --expose-gc (npm run bench does)
 * so that the prefill's garbage is collected before measuring.
 */
export function coreRates(numPages: number, fills: number[], durationMs: number): CoreResult[] {
  const state = new MetadataState(() => 0, { readLeaseTtlMs: 0 }, false);
  state.initializeRank("", 0, numPages, 1);
  // Keys are made once, as the bytes a codec hands the core: every round deletes or releases all it allocated, so they can come again.
  const half = BATCH / 2;
  const rounds = Array.from({ length: 100 }, (_, r) => {
    const keys = Array.from({ length: BATCH }, (_, i) => benchKey(r * BATCH + i));
    return { all: keyListOf(keys), firstHalf: keyListOf(keys.slice(0, half)) };
  });
  const round = () => {
    let ops = 0;
    for (const keys of rounds) {
      const { pages } = state.batchAllocate("", 0, keys.all);
      state.confirmWrite("", 0, keys.firstHalf, pages.slice(0, half), pages.slice(half));
      state.deleteKeys("", keys.firstHalf);
      ops += BATCH + half + half + half;
    }
    return ops;
  };
  const loop = (forMs: number) => {
    let ops = 0;
    const started = performance.now();
    while (performance.now() - started < forMs) ops += round();
    return (ops / (performance.now() - started)) * 1_000;
  };
  let filled = 0;
  return fills.map((fill) => {
    const target = Math.floor(numPages * fill);
    for (; filled < target; filled += 65_536) {
      const keys = Array.from({ length: Math.min(65_536, target - filled) }, (_, i) => `f${filled + i}`);
      state.batchAllocate("", 0, keys);
    }
    // Warm the JIT up, then collect the prefill's garbage, so neither is billed to the measured loop.
    loop(Math.min(200, durationMs));
    (globalThis as { gc?: () => void }).gc?.();
    return { numPages, fill, pageOpsPerSec: loop(durationMs) };
  });
}
