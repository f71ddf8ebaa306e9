import { describe, expect, it } from "vitest";
import { assertInvariants } from "../../../bench/harness/invariants.js";
import { ReplayState } from "../../../src/core/replay-state.js";
import { KeyScope, MetadataState } from "../../../src/core/state.js";
import { LmdbStore } from "../../../src/store/lmdb-store.js";
import { FakeClock } from "../../support/fake-clock.js";
import { dumpState } from "../../support/record-model.js";
import { tempDir } from "../../support/temp-dir.js";

const OPTIONS = { reservationTtlMs: 1_000, readLeaseTtlMs: 500, incompleteTtlMs: 2_000, evictHighWatermark: 1, evictLowWatermark: 1 };

/** write reserves and confirms keys on a rank. */
function write(state: MetadataState, rank: number, keys: string[], namespace = "sg"): number[] {
  const { pages } = state.batchAllocate(namespace, rank, keys);
  state.confirmWrite(namespace, rank, keys, pages);
  return pages;
}

describe("a namespace of KEY_SCOPE_RANK", () => {
  it("keeps each rank's keys apart: complete on confirmation, evicted and dropped per rank", () => {
    const time = new FakeClock();
    const state = new MetadataState(time.clock, OPTIONS);
    for (const rank of [0, 1]) state.initializeRank("sg", rank, 2, 0, { keyScope: KeyScope.RANK });
    write(state, 0, ["a", "b"]);
    write(state, 1, ["a"]);
    expect(state.batchExists("sg", ["a", "b"])).toEqual([true, false]);
    time.advance(10_000); // past every TTL: nothing of one rank is incomplete
    expect(state.batchExists("sg", ["a", "b"], 0)).toEqual([true, true]);
    write(state, 0, ["c"]); // rank 0 is full: its least recently used key ("a") goes, rank 1's stays
    expect(state.batchExists("sg", ["a", "c"], 0)).toEqual([false, true]);
    expect(state.batchExists("sg", ["a"], 1)).toEqual([true]);
    expect(state.dropRank("sg", 0)).toBe(2);
    expect(state.stats("sg")).toMatchObject([{ namespace: "sg", keyScope: KeyScope.RANK, keys: 1, ranks: [{ rank: 1, usedPages: 1 }] }]);
    expect(state.dropRank("sg", 1)).toBe(1);
    expect(state.stats("sg")).toEqual([]);
    // Gone, the name is free again, for either scope.
    expect(state.initializeRank("sg", 0, 2, 0).created).toBe(true);
    expect(state.stats("sg")).toMatchObject([{ keyScope: KeyScope.NAMESPACE }]);
    assertInvariants(state);
  });

  it("counts as one namespace against --max-namespaces, and its ranks against --max-ranks-per-namespace", () => {
    const state = new MetadataState(new FakeClock().clock, { maxNamespaces: 1, maxRanksPerNamespace: 2 });
    state.initializeRank("sg", 0, 2, 0, { keyScope: KeyScope.RANK });
    state.initializeRank("sg", 1, 2, 0, { keyScope: KeyScope.RANK });
    expect(() => state.initializeRank("sg", 2, 2, 0, { keyScope: KeyScope.RANK })).toThrow(/2 ranks, the limit/);
    expect(() => state.initializeRank("other", 0, 2, 0)).toThrow(/1 namespaces, the limit/);
  });

  it("is stored and replayed whole: a restart from LMDB and a standby's takeover give the state that wrote it", async () => {
    const time = new FakeClock();
    const state = new MetadataState(time.clock, OPTIONS);
    const standby = new ReplayState(time.clock, OPTIONS);
    const dir = tempDir();
    const store = await LmdbStore.open(dir);
    const commit = async () => {
      const changes = state.takeChanges();
      for (const change of changes) standby.apply(change);
      await store.commit(changes);
    };
    for (const rank of [0, 1, 2]) state.initializeRank("sg", rank, 4, 3, { keyScope: KeyScope.RANK });
    state.initializeRank("vllm", 0, 4, 0);
    write(state, 0, ["a", "a/b"]);
    write(state, 1, ["a"]);
    write(state, 2, ["x"]);
    write(state, 0, ["v"], "vllm");
    state.getLocations("sg", 0, ["a"]); // leased: its page drains once deleted
    state.deleteKeys("sg", ["a"], 0);
    state.clear("sg", 2);
    state.batchAllocate("sg", 1, ["pending"]);
    await commit();
    await store.close();

    const reopened = await LmdbStore.open(dir);
    const restored = new MetadataState(time.clock, OPTIONS);
    restored.restore(reopened.stored());
    await reopened.close();
    const tookOver = standby.takeOver();
    for (const view of [restored, tookOver]) {
      assertInvariants(view);
      expect(dumpState(view, false)).toEqual(dumpState(state, false));
      expect(view.stats(undefined)).toEqual(state.stats(undefined));
      expect(view.batchExists("sg", ["a", "a/b"], 0)).toEqual([false, true]);
      expect(view.batchExists("sg", ["a"], 1)).toEqual([true]);
    }
  });
});
