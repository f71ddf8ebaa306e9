import fc from "fast-check";
import { describe, it } from "vitest";
import { assertInvariants } from "../../../bench/harness/invariants.js";
import { MetadataError } from "../../../src/core/errors.js";
import { MetadataState, namespacesOf } from "../../../src/core/state.js";
import { EVICTION_POLICIES } from "../../../src/core/state-options.js";
import { FakeClock } from "../../support/fake-clock.js";
import { apply, type Lease, operation, PAGES, RANKS } from "../../support/state-operations.js";

/** OPTIONS are short TTLs, and watermarks that a rank of PAGES pages passes when full (3 held > 2) and evicts down to 1. */
const OPTIONS = { reservationTtlMs: 1_000, readLeaseTtlMs: 700, incompleteTtlMs: 2_000, evictHighWatermark: 0.67, evictLowWatermark: 0.34 };

describe("the core under random operations", () => {
  it("keeps every page in one state, counts adding up, and read-leased pages with their key", () => {
    fc.assert(
      fc.property(fc.boolean(), fc.constantFrom(...EVICTION_POLICIES), fc.array(operation, { maxLength: 80 }), (knownWorldSize, eviction, ops) => {
        const time = new FakeClock();
        const state = new MetadataState(time.clock, { ...OPTIONS, eviction });
        for (let r = 0; r < RANKS; r++) state.initializeRank("", r, PAGES, knownWorldSize ? RANKS : 0);
        const leases: Lease[] = [];
        for (const op of ops) {
          try {
            apply(state, time, op, leases);
          } catch (e) {
            if (!(e instanceof MetadataError)) throw e;
          }
          assertInvariants(state);
          for (const lease of leases) {
            if (lease.untilMs <= time.nowMs) continue;
            const rank = namespacesOf(state).get("kv")!.ranks.get(lease.rank)!;
            const owner = rank.holderKey(lease.page, (entry) => namespacesOf(state).get("kv")!.keyOf(entry));
            if (owner !== lease.key) throw new Error(`leased page ${lease.page} of ${lease.key} now held by ${owner}`);
            if (!lease.deleted && rank.confirmedPage(namespacesOf(state).get("kv")!.lookup(lease.key)) !== lease.page)
              throw new Error(`leased key ${lease.key} lost its page ${lease.page}`);
          }
        }
      }),
      { numRuns: 1000 },
    );
  });

  it("evicts no key while a key naming it as parent lives, unless the LRU fallback counter rose", () => {
    fc.assert(
      fc.property(fc.boolean(), fc.array(operation, { maxLength: 80 }), (knownWorldSize, ops) => {
        const time = new FakeClock();
        const state = new MetadataState(time.clock, OPTIONS);
        for (let r = 0; r < RANKS; r++) state.initializeRank("", r, PAGES, knownWorldSize ? RANKS : 0);
        const ns = namespacesOf(state).get("kv")!;
        for (const op of ops) {
          // Deadlines due first, so that the operation itself drops keys only as it says (evictions among them).
          state.expire();
          const parents = new Map<string, string[]>();
          for (const entry of ns.keys.live()) {
            const parent = ns.tree.parentOf(entry);
            if (parent >= 0) parents.set(ns.keyOf(parent), [...(parents.get(ns.keyOf(parent)) ?? []), ns.keyOf(entry)]);
          }
          const fallbacks = ns.events.lruEvictions;
          try {
            apply(state, time, op, []);
          } catch (e) {
            if (!(e instanceof MetadataError)) throw e;
          }
          if (op.op !== "cycle" && op.op !== "allocate" && op.op !== "evictAhead") continue; // the operations that evict
          let evictedParents = 0;
          for (const [parent, children] of parents) {
            if (ns.lookup(parent) < 0 && children.some((child) => ns.lookup(child) >= 0)) evictedParents++;
          }
          if (evictedParents > ns.events.lruEvictions - fallbacks) {
            throw new Error(`${op.op} evicted ${evictedParents} keys with live children, the fallback counted ${ns.events.lruEvictions - fallbacks}`);
          }
        }
      }),
      { numRuns: 1000 },
    );
  });
});
