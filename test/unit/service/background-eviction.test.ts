import { describe, expect, it } from "vitest";
import type { Change } from "../../../src/core/change.js";
import { MetadataState } from "../../../src/core/state.js";
import { BackgroundEviction } from "../../../src/service/background-eviction.js";
import { commit } from "../../../src/service/ledger.js";
import { MemoryStore } from "../../../src/store/memory-store.js";
import { withCommit } from "../../../src/store/store.js";
import { FakeClock } from "../../support/fake-clock.js";

/** turns lets the steps scheduled so far (setImmediate) run, and the ones they schedule. */
async function turns(n: number): Promise<void> {
  for (let i = 0; i < n; i++) await new Promise((resolve) => setImmediate(resolve));
}

/** setup fills a rank of 1,000 pages to 960 held with complete keys: past the high watermark (0.95), to be brought to the low one (0.5). */
function setup(admits: () => boolean) {
  const state = new MetadataState(new FakeClock().clock, { evictHighWatermark: 0.95, evictLowWatermark: 0.5 });
  const committed: Change[][] = [];
  const store = new MemoryStore();
  const recording = withCommit(store, (changes) => {
    if (changes.length > 0) committed.push([...changes]);
    return store.commit(changes);
  });
  const eviction = new BackgroundEviction({ state, store: recording }, admits, 100);
  state.initializeRank("", 0, 1_000, 1);
  const keys = Array.from({ length: 960 }, (_, i) => `k${i}`);
  state.confirmWrite("", 0, keys, state.batchAllocate("", 0, keys).pages);
  return { state, eviction, committed };
}

describe("background eviction", () => {
  it("after a commit that leaves a rank crowded, evicts in steps of at most its step size, each committed, down to the low watermark", async () => {
    const { state, eviction, committed } = setup(() => true);
    await commit(eviction.ledger);
    committed.length = 0;
    await turns(10);
    expect(state.stats("")[0]!.ranks[0]!.usedPages).toBe(500);
    expect(state.evictionPending).toBe(false);
    // 460 evictions, in 5 steps of at most 100, each its own commit of one forget per key.
    const forgets = committed.map((changes) => changes.filter((c) => c.kind === "forget").length);
    expect(forgets).toEqual([100, 100, 100, 100, 60]);
  });

  it("does nothing while the server does not serve, nor once closed", async () => {
    let serving = false;
    const { state, eviction } = setup(() => serving);
    await commit(eviction.ledger);
    await turns(5);
    expect(state.stats("")[0]!.ranks[0]!.usedPages).toBe(960);
    serving = true;
    eviction.close();
    await commit(eviction.ledger);
    await turns(5);
    expect(state.stats("")[0]!.ranks[0]!.usedPages).toBe(960);
  });
});
