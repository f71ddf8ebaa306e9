import type { KeyColumns } from "./key-columns.js";

/** REACHABLE: a prefix match can reach the key (every ancestor is live, or it is a root). */
export const REACHABLE = 0;
/** ORPHANED: the key's own parent is gone (dropped, or not registered when the key was). */
export const ORPHANED = 1;
/** BELOW_ORPHAN: the key's parent is live, but some ancestor of it is ORPHANED. */
export const BELOW_ORPHAN = 2;

/** NO_KEY is the entry of no key: a root's parent, the end of a list of children. */
const NO_KEY = -1;

/**
 * KeyTree is the prefix tree of a namespace's registered keys, in their
 * columns (KeyColumns.parent, .firstChild, .nextSibling, .prevSibling,
 * .reach): a key's parent is its prefix key, the key a reader must match
 * before it. Eviction reads it to keep what readers can reach.
 *
 * Invariants (asserted by the property tests):
 * - parent[e] = p ≥ 0 exactly when e is in the list of p's children, and
 *   both are registered: a key leaving the registry is detached from its
 *   parent and severed from its children;
 * - a link points to a key registered before the child, so the tree has no
 *   cycle (only a restore, which links by name, can make one; see
 *   MetadataState.restore);
 * - reach[e] is ORPHANED when e lost its parent, else BELOW_ORPHAN when
 *   its parent is not REACHABLE, else REACHABLE.
 */
export class KeyTree {
  /** stack is the work list of sever's walk, kept between calls. */
  private readonly stack: number[] = [];

  constructor(private readonly columns: KeyColumns) {}

  /** parentOf is key e's parent entry, -1 for a root or an orphan. */
  parentOf(entry: number): number {
    return this.columns.parent[entry]!;
  }

  hasChildren(entry: number): boolean {
    return this.columns.firstChild[entry] !== NO_KEY;
  }

  /** reachOf is REACHABLE, ORPHANED or BELOW_ORPHAN. */
  reachOf(entry: number): number {
    return this.columns.reach[entry]!;
  }

  /** settled tells whether key e's parent is known: linked to one, or cut from it (a root without a parent is not). */
  settled(entry: number): boolean {
    return this.columns.parent[entry]! >= 0 || this.columns.reach[entry] !== REACHABLE;
  }

  /** attach makes `parent` the parent of the key `child`, which has none; true when it is parent's first child. */
  attach(child: number, parent: number): boolean {
    const c = this.columns;
    const first = c.firstChild[parent]!;
    c.parent[child] = parent;
    c.nextSibling[child] = first;
    c.prevSibling[child] = NO_KEY;
    if (first !== NO_KEY) c.prevSibling[first] = child;
    c.firstChild[parent] = child;
    c.reach[child] = c.reach[parent] === REACHABLE ? REACHABLE : BELOW_ORPHAN;
    return first === NO_KEY;
  }

  /** orphan marks the key `child`, which has no parent, as one whose parent is gone. */
  orphan(child: number): void {
    this.columns.reach[child] = ORPHANED;
  }

  /** detach takes a key off its parent's children; it returns the parent when that left it childless, else -1. */
  detach(child: number): number {
    const c = this.columns;
    const parent = c.parent[child]!;
    if (parent === NO_KEY) return NO_KEY;
    const prev = c.prevSibling[child]!;
    const next = c.nextSibling[child]!;
    if (prev === NO_KEY) c.firstChild[parent] = next;
    else c.nextSibling[prev] = next;
    if (next !== NO_KEY) c.prevSibling[next] = prev;
    c.parent[child] = NO_KEY;
    return c.firstChild[parent] === NO_KEY ? parent : NO_KEY;
  }

  /**
   * sever cuts a key leaving the registry from its children: each becomes
   * ORPHANED (and `orphaned` hears of it), and every key below them that
   * was REACHABLE becomes BELOW_ORPHAN. `cut` hears of each key that was
   * REACHABLE and is no more.
   * Each key loses its reachability once, so this costs O(1) per key over
   * its life, however deep one call walks.
   */
  sever(entry: number, cut: (entry: number) => void, orphaned: (entry: number) => void): void {
    const c = this.columns;
    for (let child = c.firstChild[entry]!, next: number; child !== NO_KEY; child = next) {
      next = c.nextSibling[child]!;
      c.parent[child] = NO_KEY;
      c.nextSibling[child] = NO_KEY;
      c.prevSibling[child] = NO_KEY;
      const was = c.reach[child];
      c.reach[child] = ORPHANED;
      orphaned(child);
      if (was === REACHABLE) this.cutBelow(child, cut);
    }
    c.firstChild[entry] = NO_KEY;
  }

  /** cutBelow tells `cut` of `top`, then marks every REACHABLE key below it BELOW_ORPHAN and tells `cut` of each. */
  cutBelow(top: number, cut: (entry: number) => void): void {
    const c = this.columns;
    const stack = this.stack;
    cut(top);
    stack.push(top);
    while (stack.length > 0) {
      for (let child = c.firstChild[stack.pop()!]!; child !== NO_KEY; child = c.nextSibling[child]!) {
        if (c.reach[child] !== REACHABLE) continue; // cut already, with all below it
        c.reach[child] = BELOW_ORPHAN;
        cut(child);
        stack.push(child);
      }
    }
  }
}
