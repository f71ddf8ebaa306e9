import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { Change } from "../../../src/core/change.js";
import { MetadataState } from "../../../src/core/state.js";
import { FakeClock } from "../../support/fake-clock.js";
import { dumpState, RecordModel } from "../../support/record-model.js";
import { applyAsCall, operation, PAGES, RANKS } from "../../support/state-operations.js";

const OPTIONS = { reservationTtlMs: 1_000, readLeaseTtlMs: 700, incompleteTtlMs: 2_000 };

/** canonical is a list of records in one order, each as JSON: two lists of the same records are equal. */
function canonical(records: readonly Change[]): string[] {
  return records.map((r) => JSON.stringify(r, Object.keys(r).sort())).sort();
}

describe("a state listed as the records of its store (what a leader writes whole when it must keep a copy again)", () => {
  it("lists exactly the records its journal left in a store, ranks first, and restores to the same state", () => {
    fc.assert(
      fc.property(fc.boolean(), fc.array(operation, { maxLength: 60 }), (knownWorldSize, ops) => {
        const time = new FakeClock();
        const state = new MetadataState(time.clock, OPTIONS, true);
        const store = new RecordModel();
        const ship = () => {
          for (const change of state.takeChanges()) store.apply(change);
        };
        for (let r = 0; r < RANKS; r++) state.initializeRank("", r, PAGES, knownWorldSize ? RANKS : 0);
        ship();
        for (const op of ops) {
          applyAsCall(state, time, op);
          ship();
        }
        const records = state.records();
        expect(canonical(records)).toEqual(canonical(store.stored()));
        const firstOther = records.findIndex((r) => r.kind !== "rank");
        expect(records.slice(firstOther < 0 ? records.length : firstOther).every((r) => r.kind !== "rank")).toBe(true);
        const fromRecords = new MetadataState(time.clock, OPTIONS, true);
        fromRecords.restore(records);
        const fromStore = new MetadataState(time.clock, OPTIONS, true);
        fromStore.restore(store.stored());
        expect(dumpState(fromRecords)).toEqual(dumpState(fromStore));
      }),
      { numRuns: 3_000 },
    );
  });
});
