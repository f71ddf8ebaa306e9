import { createHash } from "node:crypto";
import { readFileSync, truncateSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { open } from "lmdb";
import { describe, expect, it } from "vitest";
import { assertInvariants } from "../../bench/harness/invariants.js";
import type { Change } from "../../src/core/change.js";
import { MetadataState, namespacesOf } from "../../src/core/state.js";
import { LmdbStore, type LoadProgress, type SnapshotPiece, StoreOpenError } from "../../src/store/lmdb-store.js";
import { progressFields } from "../../src/store/load-progress.js";
import { FORMAT_VERSION } from "../../src/store/schema.js";
import { FakeClock } from "../support/fake-clock.js";
import { dumpState } from "../support/record-model.js";
import { tempDir } from "../support/temp-dir.js";

const TTL = { reservationTtlMs: 1_000, readLeaseTtlMs: 500, incompleteTtlMs: 60_000 };

/** reopen loads dir into a fresh state, as a restarted server does. */
async function reopen(dir: string, time: FakeClock) {
  const store = await LmdbStore.open(dir);
  const state = new MetadataState(time.clock, TTL);
  state.restore(store.stored());
  return { store, state };
}

async function run(state: MetadataState, store: LmdbStore, op: (s: MetadataState) => unknown) {
  const result = op(state);
  await store.commit(state.takeChanges());
  return result;
}

function digest(dir: string): string {
  return createHash("sha256")
    .update(readFileSync(join(dir, "data.mdb")))
    .digest("hex");
}

describe("LmdbStore", () => {
  it("keeps ranks, reservations, confirmations, completeness and draining pages across a restart", async () => {
    const dir = tempDir();
    const time = new FakeClock();
    const first = await reopen(dir, time);
    const { state, store } = first;
    await run(state, store, (s) => s.initializeRank("ns", 0, 8, 2));
    await run(state, store, (s) => s.initializeRank("ns", 1, 8, 2));
    const a0 = (await run(state, store, (s) => s.batchAllocate("ns", 0, ["a", "b", "c"]))) as { pages: number[] };
    const a1 = (await run(state, store, (s) => s.batchAllocate("ns", 1, ["a"]))) as { pages: number[] };
    await run(state, store, (s) => s.confirmWrite("ns", 0, ["a", "b"], a0.pages.slice(0, 2)));
    await run(state, store, (s) => s.confirmWrite("ns", 1, ["a"], a1.pages));
    await run(state, store, (s) => s.getLocations("ns", 0, ["b"], true));
    await run(state, store, (s) => s.deleteKeys("ns", ["b"]));
    const serverId = store.serverId;
    await store.close();

    const second = await reopen(dir, time);
    expect(second.store.serverId).toBe(serverId);
    assertInvariants(second.state);
    expect(second.state.stats("ns")).toEqual(state.stats("ns").map((v) => ({ ...v, expiredReservations: 0 })));
    expect(second.state.batchExists("ns", ["a", "b"])).toEqual([true, false]);
    expect(second.state.getLocations("ns", 0, ["a"])).toEqual([a0.pages[0]]);
    // c's reservation survived: a retry gets the same page.
    expect(second.state.batchAllocate("ns", 0, ["c"]).pages).toEqual([a0.pages[2]]);
    // b's page drains for one read lease after the restart, then is free.
    expect(second.state.stats("ns")[0]!.ranks[0]!.usedPages).toBe(2);
    time.advance(500);
    expect(second.state.stats("ns")[0]!.ranks[0]!.usedPages).toBe(1);
    await second.store.close();
  });

  it("puts each restored page back on its rank, whatever the ranks' numbers and order", async () => {
    const dir = tempDir();
    const time = new FakeClock();
    const store = await LmdbStore.open(dir);
    const state = new MetadataState(time.clock, TTL);
    const ranks = [5, 1, 3]; // of world_size 6: rank numbers are not the slots they get, before or after a restart
    await run(state, store, (s) => {
      for (const r of ranks) s.initializeRank("ns", r, 8, 6);
      for (const r of [5, 1]) s.confirmWrite("ns", r, ["k"], s.batchAllocate("ns", r, ["x", "k"]).pages.slice(1));
      s.confirmWrite("ns", 3, ["k"], [s.batchAllocate("ns", 3, ["k"]).pages[0]!]);
    });
    const pages = ranks.map((r) => state.getLocations("ns", r, ["k"], true)[0]);
    expect(pages).toEqual([1, 1, 0]);
    await store.close();
    const second = await reopen(dir, time);
    expect(ranks.map((r) => second.state.getLocations("ns", r, ["k"], true)[0])).toEqual(pages);
    assertInvariants(second.state);
    await second.store.close();
  });

  it("keeps a dropped rank dropped across a restart: the rank, its keys' pages there and its reservations are gone", async () => {
    const dir = tempDir();
    const time = new FakeClock();
    let { store, state } = await reopen(dir, time);
    await run(state, store, (s) => {
      s.initializeRank("kv", 0, 4, 0);
      s.initializeRank("kv", 1, 4, 0);
      const [a] = s.batchAllocate("kv", 0, ["shared"]).pages;
      s.confirmWrite("kv", 0, ["shared"], [a!]);
      const [b, c] = s.batchAllocate("kv", 1, ["shared", "only-on-1"]).pages;
      s.confirmWrite("kv", 1, ["shared", "only-on-1"], [b!, c!]);
      s.batchAllocate("kv", 1, ["in-flight"]);
      return s.dropRank("kv", 1);
    });
    await store.close();
    ({ store, state } = await reopen(dir, time));
    expect(state.stats("kv")[0]).toMatchObject({ keys: 1, completeKeys: 1, ranks: [{ rank: 0, usedPages: 1 }] });
    expect(state.batchExists("kv", ["shared", "only-on-1", "in-flight"])).toEqual([true, false, false]);
    assertInvariants(state);
    await store.close();
  });

  it("reports its load's progress against the records it holds: done of total, rising, then done once", async () => {
    const dir = tempDir();
    const store = await LmdbStore.open(dir);
    const state = new MetadataState(new FakeClock().clock, TTL);
    state.initializeRank("", 0, 100_000, 1);
    const keys = Array.from({ length: 50_000 }, (_, i) => `k${i}`);
    const { pages } = state.batchAllocate("", 0, keys);
    state.confirmWrite("", 0, keys, pages);
    await store.commit(state.takeChanges());
    const reports: { records: number; total: number; done: boolean }[] = [];
    let stored = 0;
    for (const _ of store.stored((p) => reports.push(p), undefined, 0)) stored++;
    await store.close();
    expect(stored).toBe(50_001); // the rank and its keys
    expect(reports.length).toBeGreaterThanOrEqual(3); // every 16,384 keys when reports are due at once, then the end
    expect(reports.every((r) => r.total === 50_001)).toBe(true);
    expect(reports.map((r) => r.records)).toEqual([...reports.map((r) => r.records)].sort((a, b) => a - b));
    expect(reports.filter((r) => r.done)).toEqual([{ ...reports.at(-1), done: true }]);
    expect(reports.at(-1)!.records).toBe(50_001);
  });

  it("gives a new data dir a new server id", async () => {
    const a = await LmdbStore.open(tempDir());
    const b = await LmdbStore.open(tempDir());
    expect(a.serverId).not.toBe(b.serverId);
    await Promise.all([a.close(), b.close()]);
  });

  it("refuses a second opener of the same data dir", async () => {
    const dir = tempDir();
    const store = await LmdbStore.open(dir);
    await expect(LmdbStore.open(dir)).rejects.toThrow(/is locked: another hf3fs-metadata server/);
    await store.close();
    await (await LmdbStore.open(dir)).close();
  });

  it("shares one transaction among the commits of one event turn", async () => {
    const store = await LmdbStore.open(tempDir());
    const state = new MetadataState(new FakeClock().clock, TTL);
    state.initializeRank("", 0, 1_000, 1);
    await store.commit(state.takeChanges());
    const before = store.transactions();
    const commits: Promise<void>[] = [];
    for (let i = 0; i < 16; i++) {
      state.batchAllocate("", 0, [`k${i}`]);
      commits.push(store.commit(state.takeChanges()));
    }
    await Promise.all(commits);
    expect(store.transactions() - before).toBe(1);
    await store.close();
  });

  it("applies commits in the order they were made, also within one transaction", async () => {
    const dir = tempDir();
    const store = await LmdbStore.open(dir);
    const rank = { kind: "rank", namespace: "kv", rank: 0, numPages: 4, worldSize: 1 } as const;
    const reserve = (key: string) => ({ kind: "reserve", namespace: "kv", rank: 0, page: 1, key, parent: "", expiresAtMs: 9e12 }) as const;
    const unreserve = { kind: "unreserve", namespace: "kv", rank: 0, page: 1 } as const;
    await store.commit([rank]);
    // One event turn: reserve page 1 for a, free it, reserve it for b, in three commits.
    await Promise.all([store.commit([reserve("a")]), store.commit([unreserve]), store.commit([reserve("b")])]);
    await store.close();
    const reopened = await LmdbStore.open(dir);
    expect([...reopened.stored()].filter((c) => c.kind === "reserve")).toEqual([reserve("b")]);
    await reopened.close();
  });

  describe("refuses to start, naming the path and leaving the files untouched, when", () => {
    async function filledDir() {
      const dir = tempDir();
      const time = new FakeClock();
      const { state, store } = await reopen(dir, time);
      await run(state, store, (s) => s.initializeRank("", 0, 100_000, 1));
      for (let i = 0; i < 20; i++) {
        const keys = Array.from({ length: 1_000 }, (_, j) => `key-${i}-${j}`);
        const { pages } = (await run(state, store, (s) => s.batchAllocate("", 0, keys))) as { pages: number[] };
        await run(state, store, (s) => s.confirmWrite("", 0, keys, pages));
      }
      await store.close();
      return dir;
    }

    it.each([
      ["the file is truncated", (f: string) => truncateSync(f, 100_000), /corrupt or truncated|unreadable/],
      ["the file is empty", (f: string) => truncateSync(f, 0), /is empty/],
      [
        "the meta pages are garbage",
        (f: string) => {
          const bytes = readFileSync(f);
          bytes.fill(0x5a, 0, 8192);
          writeFileSync(f, bytes);
        },
        /corrupt or truncated|unreadable/,
      ],
    ])("%s", async (_, damage, message) => {
      const dir = await filledDir();
      damage(join(dir, "data.mdb"));
      const before = digest(dir);
      const error = await LmdbStore.open(dir).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(StoreOpenError);
      expect((error as Error).message).toMatch(message);
      expect((error as Error).message).toContain(dir);
      expect(digest(dir)).toBe(before);
    });

    it("the format version is newer", async () => {
      const dir = await filledDir();
      const env = open({ path: dir });
      await env.openDB("meta", {}).put("formatVersion", FORMAT_VERSION + 1);
      await env.close();
      const before = digest(dir);
      await expect(LmdbStore.open(dir)).rejects.toThrow(
        new RegExp(`format version ${FORMAT_VERSION + 1}, this server reads version ${FORMAT_VERSION}: upgrade`),
      );
      expect(digest(dir)).toBe(before);
    });
  });
});

describe("the prefix tree across a restart", () => {
  it("comes back as it was: parents, orphans and keys below them, reservations' parents too", async () => {
    const dir = tempDir();
    const time = new FakeClock();
    const { state, store } = await reopen(dir, time);
    await run(state, store, (s) => s.initializeRank("", 0, 16, 1));
    const chain = ["a", "b", "c", "d"];
    const { pages } = (await run(state, store, (s) => s.batchAllocate("", 0, chain, ["", "a", "b", "c"]))) as { pages: number[] };
    await run(state, store, (s) => s.confirmWrite("", 0, chain, pages));
    await run(state, store, (s) => s.batchAllocate("", 0, ["e", "x"], ["d", "unknown"])); // reserved only: e under d, x an orphan
    await run(state, store, (s) => s.deleteKeys("", ["b"])); // c loses its parent; d is below it
    const before = dumpState(state, false);
    await store.close();
    const after = await reopen(dir, time);
    expect(dumpState(after.state, false)).toEqual(before);
    expect((before as { parents: string[] }[])[0]!.parents).toEqual(["a ← - 0", "c ← gone 1", "d ← c 2", "e ← d 2", "x ← gone 1"]);
    assertInvariants(after.state);
    await after.store.close();
  });
});

describe("a store of an earlier format version", () => {
  /**
   * oldStore writes, as a server of format version `version` did, a rank,
   * 25,000 complete keys (more than one migration chunk), one of them long
   * enough for long_keys (version 2 only), a reservation and a drain: key
   * records without a parent, reservations without one.
   */
  async function oldStore(version: 1 | 2): Promise<string> {
    const dir = tempDir();
    const env = open({ path: dir });
    const db = (name: string) => env.openDB(name, {});
    await env.transaction(() => {
      db("meta").put("formatVersion", version);
      db("meta").put("serverId", "old-server");
      db("ranks").put(["kv", 0], [30_000, 1]);
      for (let i = 0; i < 25_000; i++) db("keys").put(["kv", `key-${i}`], [1, 0, i]);
      if (version === 2) db("long_keys").put("hash-of-long", ["kv", "l".repeat(1_000), 1, 0, 25_000]);
      db("reservations").put(["kv", 0, 25_001], ["reserved", 9e12]);
      db("drains").put(["kv", 0, 25_002], ["deleted", 9e12]);
    });
    await env.close();
    return dir;
  }

  it.each([1, 2] as const)("of version %i opens, its keys migrated as roots in place, and reads as it did", async (version) => {
    const dir = await oldStore(version);
    // Read-only, it is read as it is (inspect on a store an older server still runs).
    const readOnly = await LmdbStore.open(dir, { readOnly: true });
    const unmigrated = [...readOnly.stored()];
    expect(readOnly.dbs.meta.get("formatVersion")).toBe(version);
    await readOnly.close();

    const time = new FakeClock();
    const { store, state } = await reopen(dir, time);
    expect(store.dbs.meta.get("formatVersion")).toBe(FORMAT_VERSION);
    expect(store.serverId).toBe("old-server");
    expect(store.dbs.keys.get(["kv", "key-7"])).toEqual([1, "", 0, 7]);
    if (version === 2) expect(store.dbs.long_keys.get("hash-of-long")).toEqual(["kv", "l".repeat(1_000), 1, "", 0, 25_000]);
    expect([...store.stored()]).toEqual(unmigrated);
    const keys = version === 2 ? 25_001 : 25_000;
    expect(state.stats("kv")[0]).toMatchObject({ keys, completeKeys: keys, ranks: [{ freePages: 30_000 - keys - 2, reservedPages: 1 }] });
    // Read-leased for a TTL after the restart, then back where roots without children belong: the leaves.
    const ns = namespacesOf(state).get("kv")!;
    expect(ns.leased.size).toBe(keys);
    time.advance(10_000);
    ns.returnLeases(time.nowMs);
    expect([ns.leased.size, ns.leaves.size]).toEqual([0, keys]);
    assertInvariants(state);
    await store.close();
  });

  it.each([1, 2] as const)("of version %i reports the migration's progress: every key record read, of the total", async (version) => {
    const dir = await oldStore(version);
    const seen: LoadProgress[] = [];
    const store = await LmdbStore.open(dir, { migrating: (p) => seen.push(p) });
    const keys = version === 2 ? 25_001 : 25_000;
    expect(seen.at(-1)).toMatchObject({ records: keys, total: keys, done: true });
    expect(seen.slice(0, -1).every((p) => !p.done && p.records <= p.total && p.total === keys)).toBe(true);
    await store.close();
    // A current store migrates nothing, and says nothing.
    const again: LoadProgress[] = [];
    await (await LmdbStore.open(dir, { migrating: (p) => again.push(p) })).close();
    expect(again).toEqual([]);
  });

  it("finishes a migration cut short: records already migrated stay as they are", async () => {
    const dir = await oldStore(2);
    const env = open({ path: dir });
    await env.openDB("keys", {}).put(["kv", "key-3"], [1, "key-2", 0, 3]); // migrated, with a parent, before the cut
    await env.close();
    const { store, state } = await reopen(dir, new FakeClock());
    expect(store.dbs.keys.get(["kv", "key-3"])).toEqual([1, "key-2", 0, 3]);
    const ns = namespacesOf(state).get("kv")!;
    expect(ns.keyOf(ns.tree.parentOf(ns.lookup("key-3")))).toBe("key-2");
    assertInvariants(state);
    await store.close();
  });
});

describe("a store of many ranks and keys", () => {
  it("loads in about the memory that serving it took: each key costs the ranks it is on", async () => {
    const dir = tempDir();
    const time = new FakeClock();
    const options = { ...TTL, maxRanksPerNamespace: 3_000 };
    const store = await LmdbStore.open(dir);
    const state = new MetadataState(time.clock, options);
    const keys = Array.from({ length: 20_000 }, (_, i) => `key-${i}`);
    await run(state, store, (s) => s.initializeRank("", 0, keys.length, 0));
    await run(state, store, (s) => s.confirmWrite("", 0, keys, s.batchAllocate("", 0, keys).pages));
    await run(state, store, (s) => {
      for (let r = 1; r < 3_000; r++) s.initializeRank("", r, 1, 0);
    });
    await store.close();

    // Before, every loaded key held an array as long as the namespace's ranks: 20,000 × 3,000 entries, about 480 MB.
    const before = process.memoryUsage().heapUsed;
    const loaded = await LmdbStore.open(dir);
    const restored = new MetadataState(time.clock, options);
    restored.restore(loaded.stored());
    expect(process.memoryUsage().heapUsed - before).toBeLessThan(64 * 1024 * 1024);
    const ns = namespacesOf(restored).get("kv")!;
    expect(ns.ranks.size).toBe(3_000);
    expect(ns.confirmedPages(ns.lookup("key-7"))).toEqual([0, 7]);
    assertInvariants(restored);
    await loaded.close();
  });
});

describe("a snapshot loaded into a member's store", () => {
  const rank = (r: number): Change => ({ kind: "rank", namespace: "kv", rank: r, numPages: 8, worldSize: 0 });
  const key = (k: string, page: number): Change => ({ kind: "key", namespace: "kv", key: k, parent: "", complete: true, pages: [0, page] });
  async function* pieces(list: Change[][], appliedSeq: number, failAfter = Number.POSITIVE_INFINITY): AsyncGenerator<SnapshotPiece> {
    const total = list.reduce((sum, records) => sum + records.length, 0);
    for (const [i, records] of list.entries()) {
      if (i >= failAfter) throw new Error("the leader went away");
      yield { appliedSeq, records, total };
    }
  }
  const records = (store: LmdbStore) => [...store.stored()].map((c) => JSON.stringify(c)).sort();

  it("replaces the store's records piece by piece; a load cut midway leaves a store that opens empty, to load again", async () => {
    const dir = tempDir();
    const store = await LmdbStore.open(dir);
    await store.commit([rank(0), key("old", 1)]);
    expect(await store.loadSnapshot(pieces([[rank(0)], [key("a", 2), key("b", 3)], [key("c", 4)]], 42))).toEqual({ appliedSeq: 42, records: 4 });
    expect(store.appliedSeq).toBe(42);
    expect(records(store)).toEqual([rank(0), key("a", 2), key("b", 3), key("c", 4)].map((c) => JSON.stringify(c)).sort());

    // A source that fails before its first piece (unreachable, or it refused) leaves the store as it was.
    await expect(store.loadSnapshot(pieces([[rank(0)], [key("d", 5)]], 50, 0))).rejects.toThrow(/went away/);
    await expect(store.loadSnapshot(pieces([], 50))).rejects.toThrow(/empty/);
    expect(store.appliedSeq).toBe(42);
    expect(records(store)).toEqual([rank(0), key("a", 2), key("b", 3), key("c", 4)].map((c) => JSON.stringify(c)).sort());

    // The leader goes away after the first piece: the store is not at any applied entry, and holds no whole snapshot.
    await expect(store.loadSnapshot(pieces([[rank(0)], [key("d", 5)]], 50, 1))).rejects.toThrow(/went away/);
    expect(store.appliedSeq).toBe(0);
    await store.close();
    // A process that stopped there finds the store empty when it opens it again.
    const reopened = await LmdbStore.open(dir);
    expect(records(reopened)).toEqual([]);
    expect(reopened.appliedSeq).toBe(0);
    await expect(reopened.loadSnapshot(pieces([], 7))).rejects.toThrow(/empty/);
    expect(await reopened.loadSnapshot(pieces([[rank(0), key("e", 6)]], 60))).toEqual({ appliedSeq: 60, records: 2 });
    await reopened.close();
    const again = await LmdbStore.open(dir);
    expect(records(again)).toEqual([rank(0), key("e", 6)].map((c) => JSON.stringify(c)).sort());
    expect(again.appliedSeq).toBe(60);
    await again.close();
  });

  it("reports its progress against the snapshot's total, as the store's own load does", async () => {
    const store = await LmdbStore.open(tempDir());
    const seen: LoadProgress[] = [];
    // Reported after every piece (reportEveryMs 0), with the leader's total.
    await store.loadSnapshot(pieces([[rank(0)], [key("a", 2), key("b", 3)], [key("c", 4)]], 9), (p) => seen.push(p), 0);
    expect(seen.map(({ records, total, done }) => [records, total, done])).toEqual([
      [1, 4, false],
      [3, 4, false],
      [4, 4, false],
      [4, 4, true],
    ]);
    expect(progressFields({ records: 3, total: 4, elapsedMs: 1_000, done: false })).toEqual({
      records: 3,
      total: 4,
      percent: 75,
      recordsPerSecond: 3,
      secondsLeft: 1,
    });
    // With its total not known yet, a load has no time left to tell.
    expect(progressFields({ records: 3, total: 0, elapsedMs: 1_000, done: false })).toMatchObject({ percent: 0, recordsPerSecond: 3, secondsLeft: null });
    // What the leader sends with every piece: its entry counts when the snapshot began.
    await store.commit([key("z", 5)]);
    const snapshot = store.snapshot();
    expect(snapshot.total).toBe(5);
    snapshot.done();
    await store.close();
  });
});
