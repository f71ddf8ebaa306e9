import { grown, grownCapacity } from "./grown.js";
import { Links } from "./index-list.js";

/**
 * KeyColumns hold what a namespace knows of each key besides its pages, one
 * typed-array column per field, indexed by the key's registry entry (what
 * the key holds on each rank is the rank's, Rank.pageOf). A key costs no
 * object and no array of its own, so a steady workload allocates nothing per
 * key and the collector has nothing to trace.
 *
 * Invariant: for a live entry e, confirmed[e] and reserved[e] count the
 * ranks on which the key holds a USED and a RESERVED page; an entry with
 * both at 0 is not in the registry.
 */
export class KeyColumns {
  /** confirmed[e] is the number of ranks the key is confirmed on. */
  confirmed = new Uint16Array(0);
  /** reserved[e] is the number of ranks the key holds a reservation on. */
  reserved = new Uint16Array(0);
  /** leaseUntilMs[e] is the end of the key's read lease; 0 for none. */
  leaseUntilMs = new Float64Array(0);
  /** reclaimAtMs[e] is when the key is reclaimed if still incomplete (first confirmation + incomplete TTL). */
  reclaimAtMs = new Float64Array(0);
  /** usedAtMs[e] is when the complete key was last used (completed, read, or found EXISTING): its place when it moves between eviction lists. */
  usedAtMs = new Float64Array(0);
  /**
   * firstSlot[e] and firstPage[e] hold key e's page on one rank (by slot;
   * -1 for none) inline, so that a key on a single rank costs no rank a
   * table entry; its pages on other ranks are in those ranks' tables.
   */
  firstSlot = new Int16Array(0);
  firstPage = new Int32Array(0);
  /** links place a key with confirmed pages in one of its namespace's lists: a complete one's eviction list, or `incomplete`. */
  readonly links = new Links();
  /** parent[e] is the entry of the key's parent (its prefix key, KeyTree), -1 for none. */
  parent = new Int32Array(0);
  /** firstChild[e] is one of the keys naming e as parent, -1 for none; the rest follow by nextSibling. */
  firstChild = new Int32Array(0);
  /** nextSibling[e] and prevSibling[e] link the children of one parent, -1 at the ends. */
  nextSibling = new Int32Array(0);
  prevSibling = new Int32Array(0);
  /** reach[e] tells whether a prefix match can reach the key (KeyTree: REACHABLE, ORPHANED, BELOW_ORPHAN). */
  reach = new Uint8Array(0);

  /** fresh readies entry e for a new key: grown to hold it, holding nothing. */
  fresh(entry: number): void {
    if (entry >= this.confirmed.length) this.grow(grownCapacity(this.confirmed.length, entry + 1));
    this.confirmed[entry] = 0;
    this.reserved[entry] = 0;
    this.leaseUntilMs[entry] = 0;
    this.reclaimAtMs[entry] = 0;
    this.firstSlot[entry] = -1;
    this.parent[entry] = -1;
    this.firstChild[entry] = -1;
    this.nextSibling[entry] = -1;
    this.prevSibling[entry] = -1;
    this.reach[entry] = 0;
  }

  /** holdsNothing tells whether key e has neither a confirmed page nor a reservation, so the registry can forget it. */
  holdsNothing(entry: number): boolean {
    return this.confirmed[entry] === 0 && this.reserved[entry] === 0;
  }

  private grow(capacity: number): void {
    this.confirmed = grown(this.confirmed, capacity);
    this.reserved = grown(this.reserved, capacity);
    this.leaseUntilMs = grown(this.leaseUntilMs, capacity);
    this.reclaimAtMs = grown(this.reclaimAtMs, capacity);
    this.usedAtMs = grown(this.usedAtMs, capacity);
    this.firstSlot = grown(this.firstSlot, capacity);
    this.firstPage = grown(this.firstPage, capacity);
    this.parent = grown(this.parent, capacity);
    this.firstChild = grown(this.firstChild, capacity);
    this.nextSibling = grown(this.nextSibling, capacity);
    this.prevSibling = grown(this.prevSibling, capacity);
    this.reach = grown(this.reach, capacity);
    this.links.grow(capacity);
  }
}
