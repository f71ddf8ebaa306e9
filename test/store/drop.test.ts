import { open } from "lmdb";
import { describe, expect, it } from "vitest";
import { MetadataState } from "../../src/core/state.js";
import { LmdbStore } from "../../src/store/lmdb-store.js";
import { DROP_CHUNK } from "../../src/store/namespace-drop.js";
import { SWEEP_CHUNK } from "../../src/store/rank-sweep.js";
import { FakeClock } from "../support/fake-clock.js";
import { dumpState } from "../support/record-model.js";
import { tempDir } from "../support/temp-dir.js";

const TTL = { reservationTtlMs: 1_000, readLeaseTtlMs: 500, incompleteTtlMs: 60_000 };
/** LONG is a key past PLAIN_KEY_BYTES: its record is in long_keys, found by its value. */
const LONG = `long/${"x".repeat(995)}`;

/** filled is a state and its store with `keys` confirmed keys on each of two ranks of "big", and a few in "small". */
async function filled(dir: string, time: FakeClock, keys: number) {
  const store = await LmdbStore.open(dir);
  const state = new MetadataState(time.clock, TTL);
  for (const ns of ["big", "small"]) for (const rank of [0, 1]) state.initializeRank(ns, rank, keys + 10, 2);
  for (let at = 0; at < keys; at += 4_096) {
    const names = Array.from({ length: Math.min(4_096, keys - at) }, (_, i) => `k${at + i}`);
    if (at === 0) names[0] = LONG;
    for (const rank of [0, 1]) state.confirmWrite("big", rank, names, state.batchAllocate("big", rank, names).pages);
  }
  for (const rank of [0, 1]) state.confirmWrite("small", rank, ["s", LONG], state.batchAllocate("small", rank, ["s", LONG]).pages);
  await store.commit(state.takeChanges());
  return { store, state };
}

/** restored is what a restart from dir gives. */
async function restored(dir: string, time: FakeClock) {
  const store = await LmdbStore.open(dir);
  const state = new MetadataState(time.clock, TTL);
  state.restore(store.stored());
  await store.close();
  return state;
}

describe("a drop in the store (a reset, a Clear, a namespace's last rank dropped)", () => {
  it("is one change, removes the namespace's records a chunk per transaction, and keeps what is committed around it", async () => {
    const dir = tempDir();
    const time = new FakeClock();
    const { store, state } = await filled(dir, time, 3 * DROP_CHUNK);
    state.reset("big", true);
    const changes = state.takeChanges();
    expect(changes).toEqual([{ kind: "drop", namespace: "big" }]);
    const before = store.transactions();
    const dropped = store.commit(changes);
    // Committed while the drop is under way: another namespace's key, and the dropped one defined anew.
    state.confirmWrite("small", 0, ["t"], state.batchAllocate("small", 0, ["t"]).pages);
    state.initializeRank("big", 0, 4, 1);
    const after = store.commit(state.takeChanges());
    await Promise.all([dropped, after]);
    // 2 × 3 chunks of key records and the ranks: at least one transaction per chunk, and the mark's.
    expect(store.transactions() - before).toBeGreaterThanOrEqual(7);
    await store.close();
    const again = await restored(dir, time);
    expect(dumpState(again, false)).toEqual(dumpState(state, false));
    expect(again.stats("big")[0]).toMatchObject({ keys: 0, ranks: [{ rank: 0, numPages: 4 }] });
    expect(again.stats("small")[0]!.keys).toBe(3);
  });

  it("keeps a Clear's ranks and its pages under a read lease, as a restart finds them", async () => {
    const dir = tempDir();
    const time = new FakeClock();
    const { store, state } = await filled(dir, time, 50);
    state.getLocations("big", 0, ["k7"], true); // a read lease: its pages drain
    state.deleteKeys("big", ["k8"]);
    state.getLocations("big", 0, ["k9"], true);
    state.deleteKeys("big", ["k9"]); // draining already
    state.batchAllocate("big", 0, ["in-flight"]);
    state.clear("big");
    await store.commit(state.takeChanges());
    await store.close();
    const again = await restored(dir, time);
    expect(dumpState(again, false)).toEqual(dumpState(state, false));
    expect(again.stats("big")[0]).toMatchObject({ keys: 0, ranks: [{ usedPages: 2 }, { usedPages: 2 }] }); // draining pages are held
  });

  it("cut short by a stop, is finished when the store opens again, before anything reads it", async () => {
    const dir = tempDir();
    const time = new FakeClock();
    const { store, state } = await filled(dir, time, 2 * DROP_CHUNK);
    await store.close();
    // The mark a drop sets before its first chunk, with the records still there: a stop right after it.
    const env = open({ path: dir, noSubdir: false, maxDbs: 8 });
    await env.openDB("meta", {}).put(["dropping", "big"], [1]);
    await env.close();
    const again = await restored(dir, time);
    state.reset("big", true);
    expect(dumpState(again, false)).toEqual(dumpState(state, false));
    const raw = open({ path: dir, noSubdir: false, maxDbs: 8, readOnly: true });
    expect([...raw.openDB("meta", {}).getKeys()].filter((key) => Array.isArray(key))).toEqual([]);
    expect([...raw.openDB("long_keys", {}).getRange()].map(({ value }) => (value as string[])[0])).toEqual(["small"]);
    await raw.close();
  });
});

/** withStrayRank is a state and its store where namespace "big" (world size 0) has ranks 0, 1 and 2: `keys` keys confirmed on 0 and 1 only (incomplete while rank 2 counts), on all three, and on 2 alone. */
async function withStrayRank(dir: string, time: FakeClock, keys: number) {
  const store = await LmdbStore.open(dir);
  const state = new MetadataState(time.clock, TTL);
  for (const rank of [0, 1, 2]) state.initializeRank("big", rank, 2 * keys + 10, 0);
  const names = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => `${prefix}${i}`);
  const confirm = (rank: number, keys: string[]) => state.confirmWrite("big", rank, keys, state.batchAllocate("big", rank, keys).pages);
  const twoRanks = [LONG, ...names("two", keys - 1)];
  for (let at = 0; at < keys; at += 4_096) for (const rank of [0, 1]) confirm(rank, twoRanks.slice(at, at + 4_096));
  for (const rank of [0, 1, 2]) confirm(rank, ["all-a", "all-b"]);
  confirm(2, ["stray-only", "stray-parent"]);
  // A child of a key that goes with the rank: a restart must not link it to a later key of its parent's name.
  state.confirmWrite("big", 0, ["child"], state.batchAllocate("big", 0, ["child"], ["stray-parent"]).pages);
  await store.commit(state.takeChanges());
  return { store, state };
}

describe("a rank's drop in the store (DropRank of one rank of several)", () => {
  it("is one change, rewrites the key records a chunk per transaction, and a restart gives its state back", async () => {
    const dir = tempDir();
    const time = new FakeClock();
    const { store, state } = await withStrayRank(dir, time, 2 * SWEEP_CHUNK + 100);
    expect(state.stats("big")[0]).toMatchObject({ completeKeys: 2 });
    expect(state.dropRank("big", 2)).toBe(2);
    const changes = state.takeChanges();
    // The drop, then the record of the key it orphaned (its parent went with the rank).
    expect(changes.map((c) => c.kind)).toEqual(["unrank", "key"]);
    expect(changes[1]).toMatchObject({ key: "child", parent: null });
    const before = store.transactions();
    const dropped = store.commit(changes);
    // Committed while the sweep is under way: a key confirmed on a rank left, and the rank defined anew.
    state.confirmWrite("big", 0, ["later"], state.batchAllocate("big", 0, ["later"]).pages);
    state.initializeRank("big", 2, 8, 0);
    state.confirmWrite("big", 2, ["stray-parent"], state.batchAllocate("big", 2, ["stray-parent"]).pages);
    const after = store.commit(state.takeChanges());
    await Promise.all([dropped, after]);
    // The mark's transaction, 3 chunks of key records, the commit after.
    expect(store.transactions() - before).toBeGreaterThanOrEqual(4);
    await store.close();
    const again = await restored(dir, time);
    expect(dumpState(again, false)).toEqual(dumpState(state, false));
    // Every key on ranks 0 and 1 became complete once rank 2 no longer counted.
    expect(again.stats("big")[0]).toMatchObject({ keys: 2 * SWEEP_CHUNK + 100 + 5, completeKeys: 2 * SWEEP_CHUNK + 100 + 2 });
  });

  it("cut short by a stop, is finished when the store opens again, before anything reads it", async () => {
    const dir = tempDir();
    const time = new FakeClock();
    const { store, state } = await withStrayRank(dir, time, SWEEP_CHUNK + 10);
    await store.close();
    // The mark a rank's drop sets with the changes before it, with the records still as they were: a stop right after it.
    const env = open({ path: dir, noSubdir: false, maxDbs: 8 });
    await env.openDB("meta", {}).put(["unranking", "big", 2], [1]);
    await env.close();
    const again = await restored(dir, time);
    state.dropRank("big", 2);
    // The orphaned child's record comes with the drop's change, which this stop lost: it still names its parent, which is gone.
    expect(dumpState(again, false)).toEqual(dumpState(state, false));
    const raw = open({ path: dir, noSubdir: false, maxDbs: 8, readOnly: true });
    expect([...raw.openDB("meta", {}).getKeys()].filter((key) => Array.isArray(key))).toEqual([]);
    expect(raw.openDB("ranks", {}).getKeysCount()).toBe(2);
    await raw.close();
  });
});
