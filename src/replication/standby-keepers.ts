import type { MemberRecord } from "./cluster-keys.js";

/** MemberEntry is a member's record with the etcd revision it was last written at (every PUBLISH_MS while the member lives). */
export interface MemberEntry {
  record: MemberRecord;
  revision: string;
}

/**
 * StandbyKeepers tells a leader, at each look at the members' records,
 * whether a standby keeps the state on its own disk, so that the leader
 * need not (Member.keepCopy). A standby keeps it while it is not loading
 * and wrote its record since the look before (it lives: a record outlives
 * its member for its lease, and a member paused or dead writes none), once
 * it applied the leader's last entry of the look before (it caught up: the
 * log holds every entry after its store's), and for as long as it stays
 * within half of maxLogEntries of the log's end (the most compaction
 * deletes of what a live member has not applied): a standby that lags
 * under load keeps it still.
 */
export class StandbyKeepers {
  private caughtUpAt: number;
  private published = new Map<string, string>();
  private keepers = new Set<string>();

  /**
   * @param self is the leader's member id.
   * @param lastSeq is the log's last entry as the term begins.
   */
  constructor(
    private readonly self: string,
    lastSeq: number,
    private readonly maxLogEntries: number,
  ) {
    this.caughtUpAt = lastSeq;
  }

  /** look takes the members' records and the log's last entry now, and says whether a standby keeps the state. */
  look(entries: readonly MemberEntry[], lastSeq: number): boolean {
    const near = lastSeq - Math.floor(this.maxLogEntries / 2);
    const keepers = entries.filter(
      ({ record: m, revision }) =>
        m.memberId !== this.self &&
        m.role === "standby" &&
        m.loading === undefined &&
        (this.published.get(m.memberId) ?? revision) !== revision &&
        (m.appliedSeq >= this.caughtUpAt || (this.keepers.has(m.memberId) && m.appliedSeq >= near)),
    );
    this.keepers = new Set(keepers.map((m) => m.record.memberId));
    this.caughtUpAt = lastSeq;
    this.published = new Map(entries.map((m) => [m.record.memberId, m.revision]));
    return keepers.length > 0;
  }
}
