// What the core's limits cost at their edges, in-process: empty ranks, a full
// rank whose keys are all read-leased, and a page of GetStats over many ranks.
// Run by `npm run bench -- --only=limits` (needs --expose-gc, as npm run bench gives).

import { MetadataState } from "../../src/core/state.js";

/** LimitsResult is what measureLimits reports. */
export interface LimitsResult {
  emptyRanks: number;
  bytesPerEmptyRank: number;
  leasedKeys: number;
  allocateBatch: number;
  allocateOnLeasedRankMs: number;
  statsPageMs: number;
  statsPageNamespaces: number;
}

/** heapUsed is the heap after a full collection. */
function heapUsed(): number {
  (globalThis as { gc?: () => void }).gc?.();
  return process.memoryUsage().heapUsed;
}

/**
 * measureLimits initializes `emptyRanks` ranks of 2^31-1 pages over namespaces
 * of 1,024 ranks (heap per rank, and one GetStats page of 16 namespaces),
 * then fills a rank with `leasedKeys` keys, read-leases them all (as a
 * restart does) and times a BatchAllocate of `batch` new keys on it.
 */
export function measureLimits(emptyRanks: number, leasedKeys: number, batch: number): LimitsResult {
  const ranks = new MetadataState(() => 0, { maxRanksPerNamespace: 1_024, maxNamespaces: 1_024 });
  const before = heapUsed();
  for (let i = 0; i < emptyRanks; i++) ranks.initializeRank(`ns${Math.floor(i / 1_024)}`, i % 1_024, 2 ** 31 - 1, 0);
  const bytesPerEmptyRank = (heapUsed() - before) / emptyRanks;
  let started = performance.now();
  const page = ranks.statsPage("", 16);
  const statsPageMs = performance.now() - started;

  let nowMs = 0;
  const full = new MetadataState(() => nowMs, { maxKeysPerCall: 65_536, evictHighWatermark: 1, evictLowWatermark: 1 });
  full.initializeRank("kv", 0, leasedKeys, 1);
  for (let i = 0; i < leasedKeys; i += 65_536) {
    const keys = Array.from({ length: Math.min(65_536, leasedKeys - i) }, (_, j) => `k${i + j}`);
    const { pages } = full.batchAllocate("kv", 0, keys);
    full.confirmWrite("kv", 0, keys, pages);
    full.getLocations("kv", 0, keys);
  }
  nowMs += 1;
  started = performance.now();
  full.batchAllocate(
    "kv",
    0,
    Array.from({ length: batch }, (_, i) => `new${i}`),
  );
  const allocateOnLeasedRankMs = performance.now() - started;
  return {
    emptyRanks,
    bytesPerEmptyRank,
    leasedKeys,
    allocateBatch: batch,
    allocateOnLeasedRankMs,
    statsPageMs,
    statsPageNamespaces: page.views.length,
  };
}
