import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { assertInvariants } from "../../../bench/harness/invariants.js";
import { ReplayState } from "../../../src/core/replay-state.js";
import { MetadataState } from "../../../src/core/state.js";
import { FakeClock } from "../../support/fake-clock.js";
import { dumpState, RecordModel, shipper } from "../../support/record-model.js";
import { applyAsCall, operation, PAGES, RANKS } from "../../support/state-operations.js";

const OPTIONS = { reservationTtlMs: 1_000, readLeaseTtlMs: 700, incompleteTtlMs: 2_000 };

describe("a hot standby replaying the leader's journal", () => {
  it("takes over with the state a restart from the leader's store gives, and leads on from it", () => {
    fc.assert(
      fc.property(fc.boolean(), fc.array(operation, { maxLength: 60 }), fc.array(operation, { maxLength: 20 }), (knownWorldSize, ops, after) => {
        const time = new FakeClock();
        const leader = new MetadataState(time.clock, OPTIONS, true);
        const replay = new ReplayState(time.clock, OPTIONS, true);
        const store = new RecordModel();
        const ship = shipper(leader, store, replay);
        for (let r = 0; r < RANKS; r++) leader.initializeRank("", r, PAGES, knownWorldSize ? RANKS : 0);
        ship();
        for (const op of ops) {
          applyAsCall(leader, time, op);
          ship();
        }
        const restored = new MetadataState(time.clock, OPTIONS, true);
        restored.restore(store.stored());
        const standby = replay.takeOver();
        assertInvariants(standby);
        expect(dumpState(standby)).toEqual(dumpState(restored));
        // Serving on from there as the leader, it keeps its invariants and its journal keeps the store equal to it.
        for (const op of after) {
          applyAsCall(standby, time, op);
          for (const change of standby.takeChanges()) store.apply(change);
          assertInvariants(standby);
        }
        const again = new MetadataState(time.clock, OPTIONS, true);
        again.restore(store.stored());
        expect(dumpState(standby, false)).toEqual(dumpState(again, false));
      }),
      { numRuns: 3_000 },
    );
  });
});
