import { describe, expect, it } from "vitest";
import type { MemberRecord } from "../../../src/replication/cluster-keys.js";
import { type MemberEntry, StandbyKeepers } from "../../../src/replication/standby-keepers.js";

/** SNAPSHOT is a member's load of a snapshot as its record shows it. */
const SNAPSHOT = { task: "loading a snapshot", records: 10, total: 100, percent: 10, recordsPerSecond: 10, secondsLeft: 9 };

/** entry is a member's record as a look reads it: `revision` moves each time the member writes it. */
function entry(memberId: string, appliedSeq: number, revision: number, extra: Partial<MemberRecord> = {}): MemberEntry {
  return { record: { memberId, url: `http://${memberId}`, role: "standby", appliedSeq, atMs: 0, ...extra }, revision: String(revision) };
}

describe("whether a standby keeps the state, so that the leader need not (StandbyKeepers)", () => {
  it("counts a standby that lives and caught up; not at the first look, which has no earlier record to tell it lives", () => {
    const keepers = new StandbyKeepers("leader", 100, 10_000);
    const leader = (rev: number) => entry("leader", 150, rev, { role: "leader" });
    expect(keepers.look([leader(1), entry("a", 100, 1)], 150)).toBe(false);
    expect(keepers.look([leader(2), entry("a", 150, 2)], 200)).toBe(true);
    // Its record unchanged since the look before: dead or paused, however far it had applied.
    expect(keepers.look([leader(3), entry("a", 200, 2)], 200)).toBe(false);
  });

  it("does not count the leader itself, a member loading, or one that never caught up", () => {
    const keepers = new StandbyKeepers("leader", 100, 10_000);
    keepers.look([entry("leader", 100, 1, { role: "leader" }), entry("l", 100, 1, { loading: SNAPSHOT }), entry("b", 10, 1)], 100);
    expect(keepers.look([entry("leader", 120, 2, { role: "leader" }), entry("l", 120, 2, { loading: SNAPSHOT }), entry("b", 99, 2)], 120)).toBe(false);
  });

  it("keeps counting a standby that lags under load, while it stays within half of maxLogEntries of the log's end", () => {
    const keepers = new StandbyKeepers("leader", 0, 1_000);
    keepers.look([entry("a", 0, 1)], 100);
    expect(keepers.look([entry("a", 100, 2)], 400)).toBe(true); // caught up with the look before
    expect(keepers.look([entry("a", 300, 3)], 700)).toBe(true); // behind the look before (400), within 500 of 700
    expect(keepers.look([entry("a", 250, 4)], 800)).toBe(false); // 550 behind: compaction may delete what it has not applied
    expect(keepers.look([entry("a", 790, 5)], 900)).toBe(false); // once dropped, it must catch up again (800)
    expect(keepers.look([entry("a", 900, 6)], 950)).toBe(true);
  });
});
