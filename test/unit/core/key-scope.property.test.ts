import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { assertInvariants } from "../../../bench/harness/invariants.js";
import { ReplayState } from "../../../src/core/replay-state.js";
import { KeyScope, MetadataState } from "../../../src/core/state.js";
import { FakeClock } from "../../support/fake-clock.js";
import { dumpState, RecordModel, shipper } from "../../support/record-model.js";
import { applyAsCall, operation, PAGES, RANKS } from "../../support/state-operations.js";

const OPTIONS = { reservationTtlMs: 1_000, readLeaseTtlMs: 700, incompleteTtlMs: 2_000 };

describe("a namespace of KEY_SCOPE_RANK under random operations", () => {
  it("keeps its invariants, and a restart from its store and a standby's takeover give the state back", () => {
    fc.assert(
      fc.property(fc.array(operation, { maxLength: 60 }), (ops) => {
        const time = new FakeClock();
        const leader = new MetadataState(time.clock, OPTIONS, true);
        const replay = new ReplayState(time.clock, OPTIONS, true);
        const store = new RecordModel();
        const ship = shipper(leader, store, replay);
        for (let r = 0; r < RANKS; r++) leader.initializeRank("", r, PAGES, 0, { keyScope: KeyScope.RANK });
        ship();
        for (const op of ops) {
          applyAsCall(leader, time, op);
          ship();
          assertInvariants(leader);
          // Each rank's keys are its own: a key is complete on the rank that confirmed it.
          for (let r = 0; r < RANKS; r++) expect(leader.stats("")[0]!.ranks.map((s) => s.rank)).toContain(r);
        }
        const restored = new MetadataState(time.clock, OPTIONS, true);
        restored.restore(store.stored());
        const standby = replay.takeOver();
        assertInvariants(restored);
        assertInvariants(standby);
        expect(dumpState(standby)).toEqual(dumpState(restored));
        expect(dumpState(restored, false)).toEqual(dumpState(leader, false));
        expect(restored.stats(undefined).map(stored)).toEqual(leader.stats(undefined).map(stored));
      }),
      { numRuns: 1_000 },
    );
  });
});

/** stored is what a namespace's stats hold that the store keeps (its event counters count since the process started). */
function stored({ namespace, worldSize, keyScope, ranks, keys, completeKeys }: ReturnType<MetadataState["stats"]>[number]) {
  return { namespace, worldSize, keyScope, ranks, keys, completeKeys };
}
