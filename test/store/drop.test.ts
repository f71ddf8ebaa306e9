import { open } from "lmdb";
import { describe, expect, it } from "vitest";
import { MetadataState } from "../../src/core/state.js";
import { LmdbStore } from "../../src/store/lmdb-store.js";
import { DROP_CHUNK } from "../../src/store/namespace-drop.js";
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
