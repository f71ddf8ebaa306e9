import { describe, expect, it, vi } from "vitest";
import { assertInvariants } from "../../../bench/harness/invariants.js";
import { MetadataError, Reason } from "../../../src/core/errors.js";
import { Rank } from "../../../src/core/rank.js";
import { AllocationStatus, MetadataState, namespacesOf, Role } from "../../../src/core/state.js";
import { FakeClock } from "../../support/fake-clock.js";

function setup(options = {}) {
  const time = new FakeClock();
  const state = new MetadataState(time.clock, { reservationTtlMs: 1_000, readLeaseTtlMs: 500, incompleteTtlMs: 5_000, ...options });
  return { time, state };
}

function reasonOf(fn: () => unknown): Reason {
  try {
    fn();
  } catch (e) {
    if (e instanceof MetadataError) return e.reason;
    throw e;
  }
  throw new Error("expected a MetadataError");
}

describe("initializeRank", () => {
  it("creates a rank once and is idempotent with the same parameters", () => {
    const { state } = setup();
    expect(state.initializeRank("", 0, 8, 2)).toEqual({ created: true, numPages: 8, freePages: 8, resizedFrom: 0 });
    expect(state.initializeRank("kv", 0, 8, 2)).toEqual({ created: false, numPages: 8, freePages: 8, resizedFrom: 0 });
  });

  it("rejects another world_size as a config mismatch", () => {
    const { state } = setup();
    state.initializeRank("", 0, 8, 2);
    expect(reasonOf(() => state.initializeRank("", 1, 8, 4))).toBe(Reason.RANK_CONFIG_MISMATCH);
  });

  it("grows a rank whose file grew, and shrinks it while no page at or past the new size is held", () => {
    const { state } = setup();
    state.initializeRank("", 0, 4, 1);
    state.takeChanges();
    expect(state.initializeRank("", 0, 6, 1)).toEqual({ created: false, numPages: 6, freePages: 6, resizedFrom: 4 });
    expect(state.takeChanges()).toEqual([{ kind: "rank", namespace: "kv", rank: 0, numPages: 6, worldSize: 1 }]);
    const { pages } = state.batchAllocate("", 0, ["a", "b", "c", "d", "e", "f"]);
    expect(pages).toEqual([0, 1, 2, 3, 4, 5]);
    state.confirmWrite("", 0, ["a", "b", "c", "d", "e", "f"], pages);
    state.deleteKeys("", ["e"]); // page 4 free again; page 5 still held by "f"
    let refused: MetadataError | undefined;
    try {
      state.initializeRank("", 0, 4, 1);
    } catch (e) {
      refused = e as MetadataError;
    }
    expect(refused?.reason).toBe(Reason.RANK_CONFIG_MISMATCH);
    expect(refused?.subject.page).toBe(5);
    expect(refused?.message).toContain("page 5 is held");
    expect(state.takeChanges().filter((c) => c.kind === "rank")).toEqual([]); // nothing changed
    state.deleteKeys("", ["f"]);
    expect(state.initializeRank("", 0, 4, 1)).toMatchObject({ numPages: 4, freePages: 0 });
    // The pages past the new size are gone: a full rank makes room below it (eviction), and a confirmation past it is out of range.
    expect(state.batchAllocate("", 0, ["g"]).pages[0]).toBeLessThan(4);
    expect(reasonOf(() => state.confirmWrite("", 0, ["g"], [4]))).toBe(Reason.PAGE_OUT_OF_RANGE);
    assertInvariants(state);
  });

  it("rejects zero pages, too many pages and a rank outside world_size", () => {
    const { state } = setup();
    expect(reasonOf(() => state.initializeRank("", 0, 0, 0))).toBe(Reason.INVALID_ARGUMENT);
    expect(reasonOf(() => state.initializeRank("", 0, 2 ** 31, 0))).toBe(Reason.INVALID_ARGUMENT);
    expect(reasonOf(() => state.initializeRank("", 2, 8, 2))).toBe(Reason.INVALID_ARGUMENT);
  });

  it("refuses ranks past --max-ranks-per-namespace and namespaces past --max-namespaces, keeping existing ones", () => {
    const { state } = setup({ maxRanksPerNamespace: 2, maxNamespaces: 2 });
    const refusal = (fn: () => unknown) => {
      try {
        fn();
      } catch (e) {
        return { reason: (e as MetadataError).reason, field: (e as MetadataError).subject.field };
      }
      throw new Error("expected a refusal");
    };
    state.initializeRank("", 0, 8, 0);
    state.initializeRank("", 7, 8, 0);
    expect(refusal(() => state.initializeRank("", 9, 8, 0))).toEqual({ reason: Reason.LIMIT_EXCEEDED, field: "rank" });
    expect(state.initializeRank("", 7, 8, 0).created).toBe(false);
    expect(refusal(() => state.initializeRank("b", 0, 8, 3))).toEqual({ reason: Reason.LIMIT_EXCEEDED, field: "world_size" });
    state.initializeRank("b", 0, 8, 2);
    expect(refusal(() => state.initializeRank("c", 0, 8, 0))).toEqual({ reason: Reason.LIMIT_EXCEEDED, field: "namespace" });
    expect(state.stats(undefined).map((ns) => ns.ranks.length)).toEqual([1, 2]);
  });

  it("keeps no state for a scheduler", () => {
    const { state } = setup();
    expect(state.initializeRank("", 0, 0, 0, { role: Role.SCHEDULER }).created).toBe(false);
    expect(state.stats(undefined)).toEqual([]);
  });
});

describe("batchAllocate", () => {
  it("fails for a rank that is not initialized", () => {
    const { state } = setup();
    expect(reasonOf(() => state.batchAllocate("", 0, ["a"]))).toBe(Reason.RANK_NOT_INITIALIZED);
  });

  it("reserves distinct pages, returns the same page on retry and for repeats", () => {
    const { state } = setup();
    state.initializeRank("", 0, 4, 1);
    const first = state.batchAllocate("", 0, ["a", "b", "a"]);
    expect(first.statuses).toEqual([AllocationStatus.NEW, AllocationStatus.NEW, AllocationStatus.RESERVED]);
    expect(first.pages[0]).toBe(first.pages[2]);
    expect(first.pages[0]).not.toBe(first.pages[1]);
    const retry = state.batchAllocate("", 0, ["a"]);
    expect(retry).toEqual({ pages: [first.pages[0]], statuses: [AllocationStatus.RESERVED] });
    assertInvariants(state);
  });

  it("answers EXISTING for a confirmed key without taking a page", () => {
    const { state } = setup();
    state.initializeRank("", 0, 4, 1);
    const { pages } = state.batchAllocate("", 0, ["a"]);
    state.confirmWrite("", 0, ["a"], pages);
    expect(state.batchAllocate("", 0, ["a"])).toEqual({ pages, statuses: [AllocationStatus.EXISTING] });
    expect(state.stats("")[0]!.ranks[0]).toMatchObject({ freePages: 3, usedPages: 1, reservedPages: 0 });
  });

  it("answers NO_SPACE when every page is reserved", () => {
    const { state } = setup();
    state.initializeRank("", 0, 2, 1);
    const { pages, statuses } = state.batchAllocate("", 0, ["a", "b", "c"]);
    expect(pages[2]).toBe(-1);
    expect(statuses[2]).toBe(AllocationStatus.NO_SPACE);
  });

  it("evicts the least recently used complete key when full", () => {
    const { state } = setup();
    state.initializeRank("", 0, 2, 1);
    const { pages } = state.batchAllocate("", 0, ["a", "b"]);
    state.confirmWrite("", 0, ["a", "b"], pages);
    state.batchAllocate("", 0, ["a"]); // touches a: b is now the oldest
    const c = state.batchAllocate("", 0, ["c"]);
    expect(c.pages[0]).toBe(pages[1]);
    expect(state.batchExists("", ["a", "b"])).toEqual([true, false]);
    expect(state.stats("")[0]!.evictions).toBe(1);
    assertInvariants(state);
  });

  it("never evicts a key of the same batch", () => {
    const { state } = setup();
    state.initializeRank("", 0, 1, 1);
    const { pages } = state.batchAllocate("", 0, ["a"]);
    state.confirmWrite("", 0, ["a"], pages);
    const result = state.batchAllocate("", 0, ["a", "b"]);
    expect(result.statuses).toEqual([AllocationStatus.EXISTING, AllocationStatus.NO_SPACE]);
  });

  it("never evicts a read-leased key until its lease ends", () => {
    const { time, state } = setup();
    state.initializeRank("", 0, 1, 1);
    const { pages } = state.batchAllocate("", 0, ["a"]);
    state.confirmWrite("", 0, ["a"], pages);
    expect(state.getLocations("", 0, ["a"])).toEqual(pages);
    expect(state.batchAllocate("", 0, ["b"]).statuses).toEqual([AllocationStatus.NO_SPACE]);
    time.advance(500);
    expect(state.batchAllocate("", 0, ["b"]).pages).toEqual(pages);
  });

  it("rejects oversized batches, empty keys and long keys", () => {
    const { state } = setup({ maxKeysPerCall: 2, maxKeyBytes: 4 });
    state.initializeRank("", 0, 4, 1);
    expect(reasonOf(() => state.batchAllocate("", 0, ["a", "b", "c"]))).toBe(Reason.LIMIT_EXCEEDED);
    expect(reasonOf(() => state.batchAllocate("", 0, [""]))).toBe(Reason.INVALID_ARGUMENT);
    expect(reasonOf(() => state.batchAllocate("", 0, ["ééé"]))).toBe(Reason.LIMIT_EXCEEDED);
    expect(reasonOf(() => state.batchAllocate("", 0, ["a"], ["x", "y"]))).toBe(Reason.INVALID_ARGUMENT);
  });
});

describe("confirmWrite", () => {
  it("makes a key complete when every rank confirmed it", () => {
    const { state } = setup();
    state.initializeRank("", 0, 4, 2);
    state.initializeRank("", 1, 4, 2);
    const p0 = state.batchAllocate("", 0, ["a"]).pages;
    const p1 = state.batchAllocate("", 1, ["a"]).pages;
    expect(state.confirmWrite("", 0, ["a"], p0)).toEqual({ confirmed: 1, released: 0, completed: [] });
    expect(state.batchExists("", ["a"])).toEqual([false]);
    expect(state.batchExists("", ["a"], 0)).toEqual([true]);
    expect(state.getLocations("", 0, ["a"])).toEqual([-1]);
    expect(state.getLocations("", 0, ["a"], true)).toEqual(p0);
    expect(state.confirmWrite("", 1, ["a"], p1)).toEqual({ confirmed: 1, released: 0, completed: [0] });
    expect(state.batchExists("", ["a"])).toEqual([true]);
    expect(state.getLocations("", 1, ["a"])).toEqual(p1);
  });

  it("is a no-op for an identical repeat", () => {
    const { state } = setup();
    state.initializeRank("", 0, 4, 1);
    const { pages } = state.batchAllocate("", 0, ["a"]);
    state.confirmWrite("", 0, ["a"], pages);
    expect(state.confirmWrite("", 0, ["a"], pages)).toEqual({ confirmed: 0, released: 0, completed: [] });
  });

  it("rejects a page that was never reserved for the key, changing nothing", () => {
    const { state } = setup();
    state.initializeRank("", 0, 4, 1);
    const { pages } = state.batchAllocate("", 0, ["a", "b"]);
    expect(reasonOf(() => state.confirmWrite("", 0, ["a", "b"], [pages[0]!, pages[0]!]))).toBe(Reason.RESERVATION_NOT_FOUND);
    expect(reasonOf(() => state.confirmWrite("", 0, ["a", "c"], [pages[0]!, 3]))).toBe(Reason.RESERVATION_NOT_FOUND);
    expect(state.batchExists("", ["a"], 0)).toEqual([false]);
    assertInvariants(state);
  });

  it("accepts a late write whose expired page stayed free, refuses one whose page was reused", () => {
    const { time, state } = setup();
    state.initializeRank("", 0, 2, 1);
    const a = state.batchAllocate("", 0, ["a"]).pages;
    const b = state.batchAllocate("", 0, ["b"]).pages;
    time.advance(1_000);
    expect(state.stats("")[0]!.expiredReservations).toBe(2);
    expect(state.confirmWrite("", 0, ["a"], a).confirmed).toBe(1);
    state.batchAllocate("", 0, ["c"]); // takes b's page
    expect(reasonOf(() => state.confirmWrite("", 0, ["b"], b))).toBe(Reason.RESERVATION_NOT_FOUND);
    assertInvariants(state);
  });

  it("refuses a lapsed page of a key that was confirmed elsewhere since", () => {
    const { time, state } = setup();
    state.initializeRank("", 0, 4, 1);
    const lapsed = state.batchAllocate("", 0, ["a", "b"]).pages.slice(0, 1);
    time.advance(1_000);
    const fresh = state.batchAllocate("", 0, ["a"]).pages;
    expect(fresh).not.toEqual(lapsed);
    state.confirmWrite("", 0, ["a"], fresh);
    expect(reasonOf(() => state.confirmWrite("", 0, ["a"], lapsed))).toBe(Reason.RESERVATION_NOT_FOUND);
    assertInvariants(state);
  });

  it("refuses one key confirmed at two lapsed pages in one batch, changing nothing", () => {
    const { time, state } = setup();
    state.initializeRank("", 0, 4, 1);
    const [p0] = state.batchAllocate("", 0, ["a", "x"]).pages;
    time.advance(1_000);
    const [p1] = state.batchAllocate("", 0, ["a"]).pages;
    time.advance(1_000);
    expect(p1).not.toBe(p0);
    expect(reasonOf(() => state.confirmWrite("", 0, ["a", "a"], [p0!, p1!]))).toBe(Reason.RESERVATION_NOT_FOUND);
    expect(state.confirmWrite("", 0, ["a", "a"], [p1!, p1!]).confirmed).toBe(1);
    assertInvariants(state);
  });

  it("releases pages reserved for the keys named, ignores free ones, refuses used ones", () => {
    const { state } = setup();
    state.initializeRank("", 0, 4, 1);
    const { pages } = state.batchAllocate("", 0, ["a", "b"]);
    expect(state.confirmWrite("", 0, ["a"], [pages[0]!], [pages[1]!, 3], ["b", "c"])).toEqual({ confirmed: 1, released: 1, completed: [0] });
    expect(reasonOf(() => state.confirmWrite("", 0, [], [], [pages[0]!]))).toBe(Reason.PAGE_IN_USE);
    expect(reasonOf(() => state.confirmWrite("", 0, [], [], [1, 2], ["b"]))).toBe(Reason.INVALID_ARGUMENT);
    expect(state.stats("")[0]!.ranks[0]).toMatchObject({ freePages: 3, reservedPages: 0, usedPages: 1 });
  });

  it("never frees another writer's reservation: a release without its key, or naming another key, changes nothing", () => {
    const { state } = setup();
    state.initializeRank("", 0, 4, 1);
    const [page] = state.batchAllocate("", 0, ["w1"]).pages;
    // A third party names the page alone, or with another key: writer 1 keeps it and confirms.
    expect(state.confirmWrite("", 0, [], [], [page!]).released).toBe(0);
    expect(state.confirmWrite("", 0, [], [], [page!], ["intruder"]).released).toBe(0);
    expect(state.batchAllocate("", 0, ["w2"]).pages[0]).not.toBe(page);
    expect(state.confirmWrite("", 0, ["w1"], [page!]).confirmed).toBe(1);
    assertInvariants(state);
  });

  it("a slow writer whose reservation lapsed cannot release the page once it is reserved for another key", () => {
    const { time, state } = setup({ reservationTtlMs: 1_000 });
    state.initializeRank("", 0, 1, 1);
    const [page] = state.batchAllocate("", 0, ["slow"]).pages;
    time.advance(1_001);
    expect(state.batchAllocate("", 0, ["second"]).pages).toEqual([page]); // the lapsed page, reserved again
    // The slow writer gives up and releases "its" page: the second writer's reservation stands.
    expect(state.confirmWrite("", 0, [], [], [page!], ["slow"]).released).toBe(0);
    expect(state.batchAllocate("", 0, ["third"]).pages).toEqual([-1]);
    expect(state.confirmWrite("", 0, ["second"], [page!]).confirmed).toBe(1);
    expect(state.getLocations("", 0, ["second", "third"])).toEqual([page, -1]);
    assertInvariants(state);
  });

  it("rejects pages out of range and parallel arrays of different lengths", () => {
    const { state } = setup();
    state.initializeRank("", 0, 4, 1);
    expect(reasonOf(() => state.confirmWrite("", 0, ["a"], [4]))).toBe(Reason.PAGE_OUT_OF_RANGE);
    expect(reasonOf(() => state.confirmWrite("", 0, [], [], [-1]))).toBe(Reason.PAGE_OUT_OF_RANGE);
    expect(reasonOf(() => state.confirmWrite("", 0, ["a"], []))).toBe(Reason.INVALID_ARGUMENT);
  });
});

describe("deleteKeys and clear", () => {
  it("frees pages at once without a lease and after the lease with one", () => {
    const { time, state } = setup();
    state.initializeRank("", 0, 2, 1);
    const { pages } = state.batchAllocate("", 0, ["a", "b"]);
    state.confirmWrite("", 0, ["a", "b"], pages);
    state.getLocations("", 0, ["a"]);
    expect(state.deleteKeys("", ["a", "b", "zz"])).toBe(2);
    expect(state.batchExists("", ["a", "b"])).toEqual([false, false]);
    expect(state.stats("")[0]!.ranks[0]).toMatchObject({ freePages: 1, usedPages: 1 });
    expect(state.batchAllocate("", 0, ["c", "d"]).pages).toEqual([pages[1], -1]);
    time.advance(500);
    expect(state.stats("")[0]!.ranks[0]).toMatchObject({ freePages: 1, reservedPages: 1 });
    assertInvariants(state);
  });

  it("clear drops keys and reservations but keeps ranks", () => {
    const { state } = setup();
    state.initializeRank("ns", 0, 4, 1);
    const { pages } = state.batchAllocate("ns", 0, ["a", "b"]);
    state.confirmWrite("ns", 0, ["a"], [pages[0]!]);
    state.clear("ns");
    expect(state.stats("ns")[0]).toMatchObject({ keys: 0, ranks: [{ freePages: 4 }] });
    expect(state.initializeRank("ns", 0, 4, 1).created).toBe(false);
  });
});

describe("incomplete keys", () => {
  it("are reclaimed after the incomplete TTL", () => {
    const { time, state } = setup();
    state.initializeRank("", 0, 2, 2);
    state.initializeRank("", 1, 2, 2);
    const { pages } = state.batchAllocate("", 0, ["a"]);
    state.confirmWrite("", 0, ["a"], pages);
    time.advance(4_999);
    expect(state.batchExists("", ["a"], 0)).toEqual([true]);
    time.advance(1);
    expect(state.batchExists("", ["a"], 0)).toEqual([false]);
    expect(state.stats("")[0]).toMatchObject({ reclaimedIncompleteKeys: 1, ranks: [{ freePages: 2 }, { freePages: 2 }] });
  });
});

describe("deadlines", () => {
  it("are met whatever their order: an incomplete TTL shorter than the reservation TTL", () => {
    const { time, state } = setup({ reservationTtlMs: 10_000, incompleteTtlMs: 2_000 });
    state.initializeRank("", 0, 2, 2);
    state.initializeRank("", 1, 2, 2);
    const { pages } = state.batchAllocate("", 0, ["a", "b"]);
    state.confirmWrite("", 0, ["a"], [pages[0]!]);
    time.advance(2_000);
    expect(state.batchExists("", ["a"], 0)).toEqual([false]);
    expect(state.stats("")[0]).toMatchObject({ reclaimedIncompleteKeys: 1, expiredReservations: 0 });
    time.advance(8_000);
    expect(state.stats("")[0]).toMatchObject({ expiredReservations: 1, ranks: [{ freePages: 2 }, { freePages: 2 }] });
  });

  it("of a namespace reset or cleared are passed over: they never touch the namespace defined anew under its name", () => {
    for (const forget of [(s: MetadataState) => s.reset("", true), (s: MetadataState) => s.clear("")]) {
      const { time, state } = setup({ reservationTtlMs: 1_000, incompleteTtlMs: 1_500 });
      state.initializeRank("", 0, 2, 2);
      state.initializeRank("", 1, 2, 2);
      const { pages } = state.batchAllocate("", 0, ["a", "b"]);
      state.confirmWrite("", 0, ["a"], [pages[0]!]); // "a" incomplete (reclaimed at 1.5 s), "b" reserved (expires at 1 s)
      forget(state);
      state.initializeRank("", 0, 2, 2);
      state.initializeRank("", 1, 2, 2);
      time.advance(600);
      state.batchAllocate("", 0, ["b"]); // the same page again, until 1.6 s
      state.confirmWrite("", 0, ["a"], state.batchAllocate("", 0, ["a"]).pages); // incomplete again, until 2.1 s
      state.takeChanges();
      time.advance(950); // the old deadlines (1 s, 1.5 s) are due, the new ones not
      state.expire();
      expect(state.takeChanges()).toEqual([]);
      expect(state.stats("")[0]).toMatchObject({ keys: 1, ranks: [{ reservedPages: 1, usedPages: 1 }, { freePages: 2 }] });
    }
  });
});

describe("a key in a namespace of many ranks", () => {
  it("costs memory for the ranks it is confirmed on, not for every rank of the namespace", () => {
    const { state } = setup({ maxRanksPerNamespace: 5_000 });
    for (let r = 0; r < 5_000; r++) state.initializeRank("", r, 4, 0);
    for (const rank of [4_999, 0]) {
      const { pages } = state.batchAllocate("", rank, ["k"]);
      state.confirmWrite("", rank, ["k"], pages);
    }
    const ns = namespacesOf(state).get("kv")!;
    expect(ns.confirmedPages(ns.lookup("k"))).toEqual([0, 0, 4_999, 0]);
    expect(state.getLocations("", 4_999, ["k"], true)).toEqual([0]);
    assertInvariants(state);
  });
});

describe("expiry among many namespaces", () => {
  it("looks only at the ranks and namespaces with something due", () => {
    const { time, state } = setup({ maxNamespaces: 2_000 });
    for (let n = 0; n < 1_000; n++) {
      state.initializeRank(`idle-${n}`, 0, 4, 2);
      state.batchAllocate(`idle-${n}`, 0, ["waiting"]);
    }
    state.initializeRank("", 0, 4, 2);
    time.advance(900);
    const looked = vi.spyOn(Rank.prototype, "expireReservations");
    const peeked = vi.spyOn(Rank.prototype, "firstExpiryMs");
    for (let i = 0; i < 10; i++) {
      state.batchAllocate("", 0, ["k"]);
      time.advance(1_001);
    }
    // Each cycle expires "k" on one rank (the idle ones all expired in the first, 100 ms in).
    expect(looked.mock.calls.length).toBeLessThan(1_000 + 30);
    looked.mockClear();
    peeked.mockClear();
    for (let i = 0; i < 10; i++) {
      state.batchAllocate("", 0, ["k"]);
      time.advance(1_001);
    }
    expect(looked.mock.calls.length).toBeLessThanOrEqual(20);
    expect(peeked.mock.calls.length).toBeLessThanOrEqual(40);
    expect(state.stats("")[0]).toMatchObject({ expiredReservations: 20 });
    looked.mockRestore();
    peeked.mockRestore();
  });
});

describe("a rank of 10,000,000 pages", () => {
  it("costs nothing until used and serves pages in O(1)", () => {
    const { state } = setup();
    state.initializeRank("", 0, 10_000_000, 1);
    const before = process.memoryUsage().heapUsed;
    state.initializeRank("big", 0, 2_000_000_000, 0);
    expect(process.memoryUsage().heapUsed - before).toBeLessThan(1_000_000);
    expect(state.batchAllocate("", 0, ["a"]).pages).toEqual([0]);
  });

  it("hands out pages from the bottom, so every page above the handed-out ones is free", () => {
    const { state } = setup();
    state.initializeRank("", 0, 2 ** 31 - 1, 1);
    state.batchAllocate("", 0, ["a", "b", "c"]);
    const rank = namespacesOf(state).get("kv")!.ranks.get(0)!;
    expect(rank.pool.handedOut).toBe(3);
    expect([rank.pageState(2), rank.pageState(3), rank.pageState(2 ** 31 - 2)]).toEqual(["reserved", "free", "free"]);
    assertInvariants(state);
  });
});

describe("a namespace's layout across a restart", () => {
  it("comes back from the store with the rank's record, and is still checked", () => {
    const { state } = setup();
    state.initializeRank("m", 0, 4, 1, { layout: "model-a" });
    const restored = new MetadataState(new FakeClock().clock);
    restored.restore(state.takeChanges());
    expect(restored.stats("m")[0]!.layout).toBe("model-a");
    expect(() => restored.initializeRank("m", 0, 4, 1, { layout: "model-b" })).toThrow(/layout "model-a", not "model-b"/);
  });
});
