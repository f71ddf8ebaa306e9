import { describe, expect, it } from "vitest";
import { assertInvariants } from "../../../bench/harness/invariants.js";
import { MetadataError, Reason } from "../../../src/core/errors.js";
import { AllocationStatus, MetadataState, namespacesOf } from "../../../src/core/state.js";
import type { StateOptions } from "../../../src/core/state-options.js";
import { FakeClock } from "../../support/fake-clock.js";

/** setup gives a state with one rank of `pages` pages (world size 1); background eviction is off unless options turn it on. */
function setup(pages: number, options: Partial<StateOptions> = {}) {
  const time = new FakeClock();
  const state = new MetadataState(time.clock, { readLeaseTtlMs: 500, evictHighWatermark: 1, evictLowWatermark: 1, ...options });
  state.initializeRank("", 0, pages, 1);
  return { time, state };
}

/** write stores keys as a worker does, each extending the one before it from `parent` ("" for a root). */
function write(state: MetadataState, keys: string[], parent = ""): AllocationStatus[] {
  const prefixes = keys.map((_, i) => (i === 0 ? parent : keys[i - 1]!));
  const { pages, statuses } = state.batchAllocate("", 0, keys, prefixes);
  state.confirmWrite(
    "",
    0,
    keys.filter((_, i) => pages[i]! >= 0),
    pages.filter((p) => p >= 0),
  );
  return statuses;
}

/** leadingHits is how many of a chain's blocks a prefix match gets: the run of hits from the start. */
function leadingHits(state: MetadataState, chain: string[]): number {
  const exists = state.batchExists("", chain);
  const miss = exists.indexOf(false);
  return miss < 0 ? chain.length : miss;
}

function counters(state: MetadataState) {
  const { evictions, orphanEvictions, leafEvictions, lruEvictions, inlineEvictions } = state.stats("")[0]!;
  return { evictions, orphanEvictions, leafEvictions, lruEvictions, inlineEvictions };
}

describe("eviction that knows prefixes", () => {
  it("evicts the oldest leaf where plain LRU evicts the shared root of two chains", () => {
    const results = (["prefix", "lru"] as const).map((eviction) => {
      const { state } = setup(4, { eviction });
      write(state, ["p1", "p2"]); // a shared prefix
      write(state, ["s1"], "p2"); // two requests' suffixes
      write(state, ["s2"], "p2");
      write(state, ["t1"]); // a new root: one page must go
      assertInvariants(state);
      return { first: leadingHits(state, ["p1", "p2", "s1"]), second: leadingHits(state, ["p1", "p2", "s2"]), counters: counters(state) };
    });
    // Prefix-aware: s1 (the oldest leaf) went; p1, p2, s2 are whole.
    expect(results[0]).toEqual({
      first: 2,
      second: 3,
      counters: { evictions: 1, orphanEvictions: 0, leafEvictions: 1, lruEvictions: 0, inlineEvictions: 1 },
    });
    // Plain LRU: p1 (the oldest key) went, and with it every leading hit.
    expect(results[1]).toEqual({
      first: 0,
      second: 0,
      counters: { evictions: 1, orphanEvictions: 0, leafEvictions: 0, lruEvictions: 1, inlineEvictions: 1 },
    });
  });

  it("takes a chain from its tip back: a parent whose last child went is the next oldest leaf", () => {
    const { state } = setup(4);
    write(state, ["a", "b", "c"]);
    write(state, ["x"]);
    write(state, ["y", "z"]); // two pages: c, then b (not x, the older leaf of the two left)
    expect(state.batchExists("", ["a", "b", "c", "x", "y", "z"])).toEqual([true, false, false, true, true, true]);
    write(state, ["w"]); // a, first among the leaves since b went
    expect(state.batchExists("", ["a", "x", "y", "z", "w"])).toEqual([false, true, true, true, true]);
    expect(counters(state)).toMatchObject({ leafEvictions: 3, lruEvictions: 0 });
    assertInvariants(state);
  });

  it("keeps a parent read since its older leaves were used, when its last child goes otherwise than by eviction", () => {
    const { time, state } = setup(4);
    write(state, ["x"]);
    time.advance(100);
    write(state, ["a", "b", "c"]);
    time.advance(100);
    state.getLocations("", 0, ["a", "b"]); // readers keep using the chain's start
    time.advance(500); // their leases end
    state.deleteKeys("", ["c"]); // b is a leaf now, used after x
    write(state, ["n1", "n2"]); // one free page, then one eviction: x, not b
    expect(state.batchExists("", ["x", "a", "b", "n1", "n2"])).toEqual([false, true, true, true, true]);
    assertInvariants(state);
  });

  it("evicts keys no prefix match can reach first, least recently used first: below a deleted key, and under an unknown prefix", () => {
    const { time, state } = setup(6);
    write(state, ["a", "b", "c", "d"]);
    time.advance(10);
    write(state, ["u"], "never-written"); // an orphan from the start
    time.advance(10);
    write(state, ["r"]); // the newest root
    expect(state.deleteKeys("", ["b"])).toBe(1); // c and d can no longer be reached
    write(state, ["n1", "n2", "n3"]); // three pages: one free, then two orphans: d, then c (its child gone), both older than u
    expect(state.batchExists("", ["a", "c", "d", "u", "r"])).toEqual([true, false, false, true, true]);
    expect(counters(state)).toMatchObject({ orphanEvictions: 2, leafEvictions: 0 });
    write(state, ["m"]); // u, an orphan, before the older leaf a
    expect(state.batchExists("", ["a", "u"])).toEqual([true, false]);
    expect(counters(state)).toMatchObject({ orphanEvictions: 3, leafEvictions: 0 });
    assertInvariants(state);
  });

  it("keeps a read-leased key, orphan or leaf, until its lease ends", () => {
    const { time, state } = setup(3);
    write(state, ["a"]);
    write(state, ["o"], "gone");
    write(state, ["r"]);
    state.getLocations("", 0, ["o", "a"]); // leases on the orphan and the oldest leaf
    write(state, ["n"]); // r, the one leaf without a lease
    expect(state.batchExists("", ["a", "o", "r", "n"])).toEqual([true, true, false, true]);
    time.advance(500);
    write(state, ["m"]); // the lease ended: the orphan first
    expect(state.batchExists("", ["a", "o", "n", "m"])).toEqual([true, false, true, true]);
    expect(counters(state)).toMatchObject({ orphanEvictions: 1, leafEvictions: 1 });
    assertInvariants(state);
  });

  it("falls back to LRU when every complete key has a live child, and counts it", () => {
    const { time, state } = setup(4);
    write(state, ["a"]);
    time.advance(10);
    write(state, ["b"]);
    const children = state.batchAllocate("", 0, ["a-child", "b-child"], ["a", "b"]); // reserved, not yet written
    expect(state.batchAllocate("", 0, ["c"]).statuses).toEqual([AllocationStatus.NEW]);
    expect(state.batchExists("", ["a", "b"])).toEqual([false, true]);
    expect(counters(state)).toMatchObject({ lruEvictions: 1, leafEvictions: 0, orphanEvictions: 0 });
    // a's child lost its parent: written now, it is an orphan, the first to go.
    state.confirmWrite("", 0, ["a-child"], [children.pages[0]!]);
    state.confirmWrite("", 0, ["c"], [state.batchAllocate("", 0, ["c"]).pages[0]!]);
    write(state, ["d"]);
    expect(state.batchExists("", ["a-child", "c"])).toEqual([false, true]);
    expect(counters(state)).toMatchObject({ lruEvictions: 1, orphanEvictions: 1 });
    assertInvariants(state);
  });

  it("never evicts the parent of a key it is allocating for", () => {
    const { state } = setup(2);
    write(state, ["a"]);
    write(state, ["b"]);
    state.batchAllocate("", 0, ["a"]); // a is used again: b is the oldest leaf
    expect(write(state, ["b-child"], "b")).toEqual([AllocationStatus.NEW]); // a goes, not b
    expect(state.batchExists("", ["a", "b", "b-child"])).toEqual([false, true, true]);
  });

  it("refuses a key given as its own prefix, a prefix over the key limit, and prefix keys of another length", () => {
    const { state } = setup(4, { maxKeyBytes: 8 });
    const reason = (prefixes: string[], keys = ["a", "b"]) => {
      try {
        state.batchAllocate("", 0, keys, prefixes);
      } catch (e) {
        if (e instanceof MetadataError) return [e.reason, e.subject.field];
        throw e;
      }
      return "accepted";
    };
    expect(reason(["", "b"])).toEqual([Reason.INVALID_ARGUMENT, "prefix_keys"]);
    expect(reason(["", "123456789"])).toEqual([Reason.LIMIT_EXCEEDED, "prefix_keys"]);
    expect(reason([""])).toEqual([Reason.INVALID_ARGUMENT, "prefix_keys"]);
    expect(state.stats("")[0]!.ranks[0]!.freePages).toBe(4); // nothing was reserved
    expect(reason(["", "a"])).toBe("accepted");
  });
});

describe("eviction ahead of need", () => {
  it("brings a rank past the high watermark down to the low one in bounded steps, and only then", () => {
    const { state } = setup(20, { evictHighWatermark: 0.9, evictLowWatermark: 0.5 });
    const keys = Array.from({ length: 18 }, (_, i) => `k${i}`);
    write(state, keys); // 18 of 20: at the high mark, not past it
    expect(state.evictionPending).toBe(false);
    write(state, ["k18"], "k17");
    expect(state.evictionPending).toBe(true);
    expect(state.evictAhead(3)).toBe(3);
    expect(state.evictionPending).toBe(true);
    expect(state.evictAhead(100)).toBe(6); // 19 - 3 - 6 = 10 pages held: half
    expect(state.evictionPending).toBe(false);
    expect(state.stats("")[0]!.ranks[0]).toMatchObject({ usedPages: 10, freePages: 10 });
    // From the tip of the chain back; none inline.
    expect(leadingHits(state, [...keys, "k18"])).toBe(10);
    expect(counters(state)).toMatchObject({ evictions: 9, leafEvictions: 9, inlineEvictions: 0 });
    assertInvariants(state);
  });

  it("lets a rank go when nothing on it can be evicted; the next allocation that crowds it marks it again", () => {
    const { time, state } = setup(4, { evictHighWatermark: 0.5, evictLowWatermark: 0.25 });
    write(state, ["a", "b", "c"]);
    state.getLocations("", 0, ["a", "b", "c"]);
    expect(state.evictionPending).toBe(true);
    expect(state.evictAhead(10)).toBe(0);
    expect(state.evictionPending).toBe(false);
    time.advance(500);
    write(state, ["d"], "c");
    expect(state.evictAhead(10)).toBe(3);
    expect(state.batchExists("", ["a", "b", "c", "d"])).toEqual([true, false, false, false]);
  });

  it("refuses watermarks out of order", () => {
    expect(() => new MetadataState(new FakeClock().clock, { evictHighWatermark: 0.8, evictLowWatermark: 0.9 })).toThrow(RangeError);
    expect(() => new MetadataState(new FakeClock().clock, { evictLowWatermark: 0 })).toThrow(RangeError);
  });
});

describe("read-leased keys and eviction", () => {
  it("leased keys are out of the lists eviction reads, so a full rank of leased keys answers -1 without reading them", () => {
    const { time, state } = setup(1_000, { eviction: "lru" });
    const keys = Array.from({ length: 1_000 }, (_, i) => `k${i}`);
    write(state, keys);
    state.getLocations("", 0, keys.slice(0, 999)); // all but k999 leased
    const ns = namespacesOf(state).get("kv")!;
    expect([ns.leased.size, ns.leaves.size + ns.lru.size + ns.orphans.size]).toEqual([999, 1]);
    // One new key takes k999's page; the next ones find nothing to read, however many.
    const { pages } = state.batchAllocate(
      "",
      0,
      Array.from({ length: 500 }, (_, i) => `new${i}`),
    );
    expect(pages.filter((p) => p >= 0)).toHaveLength(1);
    expect(state.batchExists("", ["k999"])).toEqual([false]);
    assertInvariants(state);
    // Once the leases end, the keys are evictable again, the least recently used first.
    time.advance(500);
    expect(state.batchAllocate("", 0, ["after"]).pages[0]).toBeGreaterThanOrEqual(0);
    expect(state.batchExists("", ["k0", "k1"])).toEqual([false, true]);
    assertInvariants(state);
  });

  it("a key that becomes complete while leased joins the leased keys in the order their leases end", () => {
    const time = new FakeClock();
    const state = new MetadataState(time.clock, { readLeaseTtlMs: 500, eviction: "lru" });
    for (const rank of [0, 1]) state.initializeRank("", rank, 4, 2);
    const confirm = (rank: number, key: string) => {
      const { pages } = state.batchAllocate("", rank, [key]);
      state.confirmWrite("", rank, [key], pages);
    };
    confirm(0, "early"); // incomplete: one rank of two
    state.getLocations("", 0, ["early"], true); // leased until 500
    time.advance(100);
    confirm(0, "late");
    confirm(1, "late");
    state.getLocations("", 0, ["late"]); // leased until 600
    confirm(1, "early"); // complete now, with a lease that ends before late's
    const ns = namespacesOf(state).get("kv")!;
    expect([...ns.leased]).toEqual([ns.lookup("late"), ns.lookup("early")]);
    assertInvariants(state);
  });

  it("a lease given again moves the key to the back of the leased keys, and it returns by its last use", () => {
    const { time, state } = setup(3, { eviction: "lru" });
    write(state, ["a", "b", "c"]);
    state.getLocations("", 0, ["a", "b"]);
    time.advance(300);
    state.getLocations("", 0, ["a"]); // a's lease now ends after b's
    time.advance(200); // b's lease has ended, a's has not
    expect(state.batchAllocate("", 0, ["d"]).pages[0]).toBeGreaterThanOrEqual(0); // c: the least recently used
    expect(state.batchAllocate("", 0, ["e"]).pages[0]).toBeGreaterThanOrEqual(0); // b: its lease ended
    expect(state.batchAllocate("", 0, ["f"]).pages).toEqual([-1]); // a is still leased; d and e are in this rank's reservations
    expect(state.batchExists("", ["a", "b", "c"])).toEqual([true, false, false]);
    assertInvariants(state);
  });
});

describe("eviction ahead of need on small ranks", () => {
  it("never empties a rank whose low watermark holds no page: a 1-page rank keeps its key", () => {
    const time = new FakeClock();
    const state = new MetadataState(time.clock); // the default watermarks, 0.95 and 0.90
    state.initializeRank("", 0, 1, 1);
    state.initializeRank("two", 0, 2, 1);
    expect(write(state, ["only"])).toEqual([AllocationStatus.NEW]);
    expect(state.evictionPending).toBe(false);
    expect(state.evictAhead(256)).toBe(0);
    expect(state.batchExists("", ["only"])).toEqual([true]);
    // Two pages: the low watermark is one page, so a full rank is evicted ahead down to it.
    for (const key of ["a", "b"]) {
      const { pages } = state.batchAllocate("two", 0, [key]);
      state.confirmWrite("two", 0, [key], pages);
    }
    expect(state.evictAhead(256)).toBe(1);
    assertInvariants(state);
  });
});
