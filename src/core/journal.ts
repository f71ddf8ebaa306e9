import type { Change, ParentName } from "./change.js";
import { ORPHANED } from "./key-tree.js";
import type { Namespace } from "./namespace.js";
import type { Rank } from "./rank.js";

const NO_CHANGES: readonly Change[] = Object.freeze([]);

/**
 * Journal collects the durable changes of the operations since the caller
 * last took them (take), in the order they were applied. While it is off
 * (a state nobody persists, or one that restores or replays changes it
 * did not make) it records nothing and names no key.
 */
export class Journal {
  private changes: Change[] = [];

  /** @param on whether changes are recorded. */
  constructor(public on: boolean) {}

  /** take returns the changes recorded since the last call, in order; the caller owns the array. */
  take(): readonly Change[] {
    if (this.changes.length === 0) return NO_CHANGES;
    const changes = this.changes;
    this.changes = [];
    return changes;
  }

  /** record appends one change. */
  record(change: Change): void {
    if (this.on) this.changes.push(change);
  }

  /** rank records a rank created or resized, with its namespace's world size and layout. */
  rank(ns: Namespace, rank: number, numPages: number): void {
    if (!this.on) return;
    const change: Change = { kind: "rank", namespace: ns.name, rank, numPages, worldSize: ns.worldSize };
    this.changes.push(ns.layout === "" ? change : { ...change, layout: ns.layout });
  }

  /** key records a key's confirmed pages (by rank number), completeness and parent. */
  key(ns: Namespace, entry: number): void {
    if (!this.on) return;
    this.changes.push({
      kind: "key",
      namespace: ns.name,
      key: ns.keyOf(entry),
      parent: parentName(ns, entry),
      complete: ns.isComplete(entry),
      pages: ns.confirmedPages(entry),
    });
  }

  /** reserve records key e's reservation of page on rank, with its expiry and its parent. */
  reserve(ns: Namespace, rank: Rank, entry: number, page: number): void {
    if (!this.on) return;
    this.changes.push({
      kind: "reserve",
      namespace: ns.name,
      rank: rank.rank,
      page,
      key: ns.keyOf(entry),
      parent: parentName(ns, entry),
      expiresAtMs: rank.expiresAtMs(page),
    });
  }

  /**
   * orphan records again the records of a key whose parent left the
   * registry, which name that parent: its key record and its reservations,
   * now naming none (null), so that a restart does not link it to a later
   * key of the parent's name.
   */
  orphan(ns: Namespace, entry: number): void {
    if (!this.on) return;
    if (ns.columns.confirmed[entry]! > 0) this.key(ns, entry);
    for (let slot = 0, left = ns.columns.reserved[entry]!; left > 0; slot++) {
      const rank = ns.slots[slot]!;
      const page = rank.pageOf(entry);
      if (page < 0 || rank.reservedBy(page) !== entry) continue;
      this.reserve(ns, rank, entry, page);
      left--;
    }
  }
}

/** parentName names key e's parent for the journal (ParentName). */
function parentName(ns: Namespace, entry: number): ParentName {
  const parent = ns.tree.parentOf(entry);
  if (parent >= 0) return ns.keyOf(parent);
  return ns.tree.reachOf(entry) === ORPHANED ? null : "";
}
