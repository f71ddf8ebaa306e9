import fc from "fast-check";
import { describe, it } from "vitest";
import { MetadataError } from "../../src/core/errors.js";
import { MetadataState } from "../../src/core/state.js";
import { FakeClock } from "../support/fake-clock.js";
import { assertInvariants } from "../support/invariants.js";
import { apply, type Lease, operation, PAGES, RANKS } from "../support/state-operations.js";

describe("the core under random operations", () => {
  it("keeps every page in one state, counts adding up, and read-leased pages with their key", () => {
    fc.assert(
      fc.property(fc.boolean(), fc.array(operation, { maxLength: 80 }), (knownWorldSize, ops) => {
        const time = new FakeClock();
        const state = new MetadataState(time.clock, { reservationTtlMs: 1_000, readLeaseTtlMs: 700, incompleteTtlMs: 2_000 });
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
            const rank = state.namespaceViews.get("kv")!.ranks.get(lease.rank)!;
            const owner = rank.holderKey(lease.page, (entry) => state.namespaceViews.get("kv")!.keyOf(entry));
            if (owner !== lease.key) throw new Error(`leased page ${lease.page} of ${lease.key} now held by ${owner}`);
            if (!lease.deleted && rank.confirmedPage(state.namespaceViews.get("kv")!.lookup(lease.key)) !== lease.page)
              throw new Error(`leased key ${lease.key} lost its page ${lease.page}`);
          }
        }
      }),
      { numRuns: 1000 },
    );
  });
});
