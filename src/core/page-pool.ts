import { EMPTY, grown, grownCapacity } from "./grown.js";
import { firstOwnedFrom, ownedPages, owns, type ShardPart, WHOLE } from "./shards.js";

/** PageKind is what a page of a rank is used for, one byte per page (the constants below). */
export type PageKind = 0 | 1 | 2 | 3;
/** FREE: nobody holds the page. */
export const FREE = 0;
/** RESERVED: a write in flight; the page is handed to its owner and expires unless confirmed. */
export const RESERVED = 1;
/** USED: a confirmed key's page. */
export const USED = 2;
/** DRAINING: a deleted, read-leased key's page, freed when the lease ends (it has no owner entry). */
export const DRAINING = 3;

/** NO_OWNER is the owner of a FREE or DRAINING page. */
export const NO_OWNER = -1;

/**
 * PagePool records what each page of a rank is (PageKind) and which key
 * holds it (its registry entry), and hands out free pages in O(1), whatever
 * the rank's size or fill.
 *
 * Pages at or above `nextFresh` have never been handed out and are free; no
 * memory is spent on them, so a rank of 10,000,000 pages costs nothing until
 * it is used, and its columns grow by half again as pages are handed out.
 * `freed` is a stack of pages that became free again; it may also hold
 * stale entries of pages that were claimed directly by `claim` (a
 * confirmation after a reservation lapsed) — `take` skips those, and each
 * stale entry is popped at most once, so the cost stays O(1) amortized.
 *
 * Example, numPages 4: take → 0, take → 1, release(0), take → 0 (from
 * freed), take → 2 (fresh), take → 3, take → -1 (full).
 *
 * A pool of one shard of a cluster (`part`) hands out and counts only the
 * pages the shard owns (shards.ts); the others stay FREE and unowned, and
 * nothing claims them (the caller checks `owns`).
 */
export class PagePool {
  /** owner[p] is the entry of the key holding page p (RESERVED or USED), NO_OWNER otherwise; valid below nextFresh. */
  private owner: Int32Array = EMPTY.int32;
  /** kind[p] is page p's PageKind; valid below nextFresh. */
  private kind: Uint8Array = EMPTY.uint8;
  /** freed holds free pages below nextFresh, plus stale entries of claimed ones. */
  private readonly freed: number[] = [];
  private nextFresh = 0;
  /** heldPages counts the pages that are not free. */
  heldPages = 0;

  constructor(
    /** numPages is the size of the rank's file, in pages (resize changes it). */
    public numPages: number,
    /** part is the part of the pages this pool hands out (WHOLE: all). */
    readonly part: ShardPart = WHOLE,
  ) {}

  /** firstHeldFrom is the first page at or above `from` that is not free, -1 when none is. */
  firstHeldFrom(from: number): number {
    for (let page = from; page < this.nextFresh; page++) if (this.kind[page] !== FREE) return page;
    return -1;
  }

  /**
   * resize makes the pool `numPages` pages: more are free at once; fewer
   * need every page at or above the new size free (the caller checks,
   * firstHeldFrom), and those pages are forgotten.
   */
  resize(numPages: number): void {
    if (numPages < this.nextFresh) {
      for (let i = this.freed.length - 1; i >= 0; i--) if (this.freed[i]! >= numPages) this.freed.splice(i, 1);
      this.nextFresh = numPages;
    }
    this.numPages = numPages;
  }

  /** ownedPages is the number of pages the pool hands out: numPages, or a shard's part of them. */
  get ownedPages(): number {
    return this.part.count === 1 ? this.numPages : ownedPages(this.numPages, this.part);
  }

  /** freePages is the number of free pages (of those the pool owns). */
  get freePages(): number {
    return this.ownedPages - this.heldPages;
  }

  /** owns tells whether the pool hands out page p (always, but in a shard of a cluster). */
  owns(page: number): boolean {
    return owns(this.part, page);
  }

  /** handedOut is the number of pages ever handed out: every page at or above it is free. */
  get handedOut(): number {
    return this.nextFresh;
  }

  /** capacity is the size of the page columns: every page handed out is below it. */
  get capacity(): number {
    return this.kind.length;
  }

  /** ownerOf is the entry of the key holding page p, NO_OWNER when p is FREE or DRAINING. */
  ownerOf(page: number): number {
    return page < this.nextFresh ? this.owner[page]! : NO_OWNER;
  }

  /** kindOf is page p's PageKind. */
  kindOf(page: number): PageKind {
    return page < this.nextFresh ? (this.kind[page] as PageKind) : FREE;
  }

  /** take gives a free page to entry as `kind` and returns it, or -1 when none is free. */
  take(entry: number, kind: PageKind): number {
    while (this.freed.length > 0) {
      const page = this.freed.pop()!;
      if (this.kind[page] === FREE) {
        this.hold(page, entry, kind);
        return page;
      }
    }
    const page = this.part.count === 1 ? this.nextFresh : firstOwnedFrom(this.nextFresh, this.part);
    if (page >= this.numPages) return -1;
    this.handOutTo(page + 1);
    this.hold(page, entry, kind);
    return page;
  }

  /** claim gives the free page `page` to entry (NO_OWNER for a DRAINING page) as `kind`. The caller checks that it is free. */
  claim(page: number, entry: number, kind: PageKind): void {
    if (page >= this.nextFresh) {
      for (let fresh = firstOwnedFrom(this.nextFresh, this.part); fresh < page; fresh += this.part.count) this.freed.push(fresh);
      this.handOutTo(page + 1);
    }
    this.hold(page, entry, kind);
  }

  /** change makes a held page `kind`, with owner entry (NO_OWNER for DRAINING), without freeing it. */
  change(page: number, entry: number, kind: PageKind): void {
    this.owner[page] = entry;
    this.kind[page] = kind;
  }

  /** release makes a held page free. */
  release(page: number): void {
    this.owner[page] = NO_OWNER;
    this.kind[page] = FREE;
    this.heldPages--;
    this.freed.push(page);
  }

  private hold(page: number, entry: number, kind: PageKind): void {
    this.owner[page] = entry;
    this.kind[page] = kind;
    this.heldPages++;
  }

  /** handOutTo moves nextFresh up to `end`, growing the columns by half again (up to numPages); the new pages are FREE. */
  private handOutTo(end: number): void {
    if (end > this.kind.length) {
      const capacity = Math.min(grownCapacity(this.kind.length, end), this.numPages);
      this.owner = grown(this.owner, capacity);
      this.kind = grown(this.kind, capacity);
    }
    this.owner.fill(NO_OWNER, this.nextFresh, end);
    this.nextFresh = end;
  }
}
