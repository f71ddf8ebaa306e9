import type { KeyRecord } from "./key-record.js";

/**
 * PagePool records which key holds each page of a rank and hands out free
 * pages in O(1), whatever the rank's size or fill.
 *
 * Pages at or above `nextFresh` have never been handed out and are free; no
 * memory is spent on them, so a rank of 10,000,000 pages costs nothing until
 * it is used. Below `nextFresh`, `owner[p]` is the holding key's record, or undefined
 * when p is free. `freed` is a stack of pages that became free again; it may
 * also hold stale entries of pages that were claimed directly by `claim`
 * (a confirmation after a reservation lapsed) — `take` skips those, and each
 * stale entry is popped at most once, so the cost stays O(1) amortized.
 *
 * Example, numPages 4: take("a") → 0, take("b") → 1, release(0),
 * take("c") → 0 (from freed), take("d") → 2 (fresh), take("e") → 3,
 * take("f") → -1 (full).
 */
export class PagePool {
  /** owner[p] is the record of the key holding page p, undefined when p is free; length === nextFresh. */
  private readonly owner: (KeyRecord | undefined)[] = [];
  /** freed holds free pages below nextFresh, plus stale entries of claimed ones. */
  private readonly freed: number[] = [];
  private nextFresh = 0;
  /** heldPages counts the pages that are not free. */
  heldPages = 0;

  constructor(readonly numPages: number) {}

  /** freePages is the number of free pages. */
  get freePages(): number {
    return this.numPages - this.heldPages;
  }

  /** handedOut is the number of pages ever handed out: every page at or above it is free. */
  get handedOut(): number {
    return this.nextFresh;
  }

  /** ownerOf returns the record of the key holding page p, undefined when p is free. */
  ownerOf(page: number): KeyRecord | undefined {
    return page < this.nextFresh ? this.owner[page] : undefined;
  }

  /** take gives a free page to key and returns it, or -1 when none is free. */
  take(key: KeyRecord): number {
    while (this.freed.length > 0) {
      const page = this.freed.pop()!;
      if (this.owner[page] === undefined) {
        this.owner[page] = key;
        this.heldPages++;
        return page;
      }
    }
    if (this.nextFresh === this.numPages) return -1;
    const page = this.nextFresh++;
    this.owner.push(key);
    this.heldPages++;
    return page;
  }

  /** claim gives the free page `page` to key. The caller checks that it is free. */
  claim(page: number, key: KeyRecord): void {
    while (this.nextFresh <= page) {
      if (this.nextFresh < page) this.freed.push(this.nextFresh);
      this.owner.push(undefined);
      this.nextFresh++;
    }
    this.owner[page] = key;
    this.heldPages++;
  }

  /** release makes a held page free. */
  release(page: number): void {
    this.owner[page] = undefined;
    this.heldPages--;
    this.freed.push(page);
  }
}
