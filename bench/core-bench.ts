import { MetadataState } from "../src/core/state.js";
import { benchKey } from "./recovery.js";

/** CoreResult is the page-operation rate of the core alone at one size and fill. */
export interface CoreResult {
  numPages: number;
  fill: number;
  pageOpsPerSec: number;
}

const BATCH = 64;

/**
 * coreRate fills a rank of numPages to `fill` with confirmed keys, then
 * loops: allocate 64 new keys, confirm half, release the other half, delete
 * the confirmed half (so the fill stays put). Every allocation, confirmation,
 * release and deletion is one page operation.
 */
export function coreRate(numPages: number, fill: number, durationMs: number): CoreResult {
  const state = new MetadataState(() => 0, { readLeaseTtlMs: 0 }, false);
  state.initializeRank("", 0, numPages, 1);
  const target = Math.floor(numPages * fill);
  for (let done = 0; done < target; done += 65_536) {
    const keys = Array.from({ length: Math.min(65_536, target - done) }, (_, i) => `f${done + i}`);
    state.confirmWrite("", 0, keys, state.batchAllocate("", 0, keys).pages);
  }
  // Keys are made once: every round deletes or releases all it allocated, so they can come again.
  const rounds = Array.from({ length: 100 }, (_, r) => Array.from({ length: BATCH }, (_, i) => benchKey(r * BATCH + i)));
  let ops = 0;
  const started = performance.now();
  while (performance.now() - started < durationMs) {
    for (const keys of rounds) {
      const { pages } = state.batchAllocate("", 0, keys);
      const half = BATCH / 2;
      state.confirmWrite("", 0, keys.slice(0, half), pages.slice(0, half), pages.slice(half));
      state.deleteKeys("", keys.slice(0, half));
      ops += BATCH + half + half + half;
    }
  }
  return { numPages, fill, pageOpsPerSec: (ops / (performance.now() - started)) * 1_000 };
}
