import { EMPTY, grown, grownCapacity } from "./grown.js";
import { IndexList, Links, NONE } from "./index-list.js";
import type { KeyColumns } from "./key-columns.js";
import { DRAINING, FREE, NO_OWNER, PagePool, RESERVED, USED } from "./page-pool.js";
import { type ShardPart, WHOLE } from "./shards.js";

/** NO_ENTRIES is the lapses and drains of a rank that has none. */
const NO_ENTRIES: ReadonlyMap<number, never> = new Map<number, never>();

/** PageState is the state of one page, as the contract names it. */
export type PageState = "free" | "reserved" | "used";

/** Drain is a page of a deleted, read-leased key: held until untilMs, the key named for the journal and errors. */
export interface Drain {
  readonly untilMs: number;
  readonly key: string;
}

/**
 * Rank is the page file of one tensor-parallel rank of a namespace: which
 * key holds each page and how (the pool), each key's page on this rank
 * (pageOf, by registry entry), the expiry order of reservations, lapses and
 * drains. It keeps its namespace's per-key counts (KeyColumns.confirmed,
 * .reserved) in step with its pages.
 *
 * Invariants (asserted by the property tests):
 * - every page is FREE, RESERVED, USED or DRAINING (the pool's kind), and
 *   a RESERVED or USED page p has an owner entry e with pageOf(e) = p, while
 *   pageOf(e) = p ≥ 0 only for such a page: so a key holds at most one page
 *   here, reserved or used, and no page has two keys;
 * - free + reserved + used (draining counted as used) = ownedPages (numPages, but in a shard of a cluster);
 * - `reservations` holds exactly the RESERVED pages, earliest expiry first;
 * - draining has exactly the DRAINING pages;
 * - lapsed.get(p) = k only while p is FREE: k's reservation of p expired
 *   unconfirmed, and a late ConfirmWrite of (k, p) is still accepted.
 */
export class Rank {
  readonly pool: PagePool;
  /** pageLinks order the RESERVED pages (by page number) in `reservations`. */
  private readonly pageLinks = new Links();
  /**
   * reservations are this rank's RESERVED pages in expiry order: the TTL is
   * one server option, so appending (and moving to the back on renewal)
   * keeps the earliest expiry first, and expiring is a scan of the front.
   */
  readonly reservations = new IndexList(this.pageLinks, 1);
  /** expiresAtMs[p] is when the RESERVED page p returns to FREE unless confirmed (ms since the epoch). */
  private expiresAt: Float64Array = EMPTY.float64;
  /**
   * pageByEntry[e] is key e's page on this rank, -1 for none, unless the
   * key keeps it inline (KeyColumns.firstSlot); grown only as far as the
   * entries that held a page here that way.
   */
  private pageByEntry: Int32Array = EMPTY.int32;
  /** lapsedPages maps a FREE page to the key whose reservation of it expired; made at the first lapse (an empty rank costs no map). */
  private lapsedPages: Map<number, string> | undefined;
  /** drains maps each DRAINING page to its drain; made at the first drain. */
  private drains: Map<number, Drain> | undefined;

  constructor(
    readonly rank: number,
    numPages: number,
    /** slot is the rank's index in its namespace. */
    readonly slot: number,
    /** keys are the namespace's per-key columns, whose counts this rank keeps. */
    private readonly keys: KeyColumns,
    /** part is the part of the rank's pages this rank hands out (a shard of a cluster; WHOLE: all). */
    part: ShardPart = WHOLE,
  ) {
    this.pool = new PagePool(numPages, part);
  }

  /** numPages is the size of the rank's file, in pages. */
  get numPages(): number {
    return this.pool.numPages;
  }

  /** ownedPages is how many of them this rank hands out: numPages, but in a shard of a cluster (its part of them). */
  get ownedPages(): number {
    return this.pool.ownedPages;
  }

  /** heldPages counts the pages that are not FREE. */
  get heldPages(): number {
    return this.pool.heldPages;
  }

  /**
   * resize makes the rank `numPages` pages (its file grew or shrank): a
   * smaller size needs every page at or above it free, else it returns the
   * first held one and changes nothing; -1 when resized.
   */
  resize(numPages: number): number {
    const held = numPages < this.pool.numPages ? this.pool.firstHeldFrom(numPages) : -1;
    if (held >= 0) return held;
    for (const page of [...this.lapsed.keys()]) if (page >= numPages) this.lapsedPages!.delete(page);
    this.pool.resize(numPages);
    return -1;
  }

  /** lapsed maps a FREE page to the key whose reservation of it expired. */
  get lapsed(): ReadonlyMap<number, string> {
    return this.lapsedPages ?? NO_ENTRIES;
  }

  /** draining maps each DRAINING page to its drain. */
  get draining(): ReadonlyMap<number, Drain> {
    return this.drains ?? NO_ENTRIES;
  }

  /** forgetLapses forgets every lapsed reservation (Clear): late confirmations of them are refused. */
  forgetLapses(): void {
    this.lapsedPages = undefined;
  }

  /** pageOf is key e's page on this rank, RESERVED or USED; -1 for none. */
  pageOf(entry: number): number {
    if (this.keys.firstSlot[entry] === this.slot) return this.keys.firstPage[entry]!;
    return entry < this.pageByEntry.length ? this.pageByEntry[entry]! : -1;
  }

  /** isUsed tells whether page p is USED (held by a confirmed key). */
  isUsed(page: number): boolean {
    return this.pool.kindOf(page) === USED;
  }

  /** confirmedPage is key e's USED page on this rank, -1 for none. */
  confirmedPage(entry: number): number {
    const page = this.pageOf(entry);
    return page >= 0 && this.pool.kindOf(page) === USED ? page : -1;
  }

  /** pageState derives the state of page p. */
  pageState(page: number): PageState {
    const kind = this.pool.kindOf(page);
    return kind === FREE ? "free" : kind === RESERVED ? "reserved" : "used";
  }

  /** reservedBy is the entry of the key holding page p RESERVED, -1 when p is not RESERVED. */
  reservedBy(page: number): number {
    return this.pool.kindOf(page) === RESERVED ? this.pool.ownerOf(page) : -1;
  }

  /** expiresAtMs is when the RESERVED page p expires. */
  expiresAtMs(page: number): number {
    return this.expiresAt[page]!;
  }

  /** reservedPages is the number of RESERVED pages. */
  get reservedPages(): number {
    return this.reservations.size;
  }

  /** usedPages is the number of USED pages, draining ones included. */
  get usedPages(): number {
    return this.pool.heldPages - this.reservations.size;
  }

  /** freePages is the number of FREE pages. */
  get freePages(): number {
    return this.pool.freePages;
  }

  /** reserveFree reserves a free page for key e, which holds none here, until expiresAtMs; -1 when none is free. */
  reserveFree(entry: number, expiresAtMs: number): number {
    const page = this.pool.take(entry, RESERVED);
    if (page < 0) return -1;
    this.lapsedPages?.delete(page);
    this.addReservation(entry, page, expiresAtMs);
    return page;
  }

  /** restoreReservation reserves the free page `page` for key e until expiresAtMs (recovery). */
  restoreReservation(entry: number, page: number, expiresAtMs: number): void {
    this.pool.claim(page, entry, RESERVED);
    this.addReservation(entry, page, expiresAtMs);
  }

  private addReservation(entry: number, page: number, expiresAtMs: number): void {
    if (page >= this.expiresAt.length) this.growPageColumns();
    this.expiresAt[page] = expiresAtMs;
    this.reservations.add(page);
    this.setPageOf(entry, page);
    this.keys.reserved[entry]!++;
  }

  /** renew moves the RESERVED page p's expiry to expiresAtMs, at the back of the expiry order. */
  renew(page: number, expiresAtMs: number): void {
    this.expiresAt[page] = expiresAtMs;
    this.reservations.moveToBack(page);
  }

  /** expireReservations frees every reservation expired by nowMs, earliest first, telling `expired` each page and the entry that held it. */
  expireReservations(nowMs: number, expired: (page: number, entry: number) => void): void {
    for (let page = this.reservations.first; page >= 0 && this.expiresAt[page]! <= nowMs; page = this.reservations.first) {
      expired(page, this.releaseReservation(page));
    }
  }

  /** firstExpiryMs is the earliest reservation expiry, Infinity for none. */
  firstExpiryMs(): number {
    const first = this.reservations.first;
    return first === NONE ? Infinity : this.expiresAt[first]!;
  }

  /** sortReservations restores the expiry order after reservations were restored in page order. */
  sortReservations(): void {
    const sorted = [...this.reservations].sort((a, b) => this.expiresAt[a]! - this.expiresAt[b]!);
    for (const page of sorted) this.reservations.moveToBack(page);
  }

  /** releaseReservation makes the RESERVED page p FREE and returns the entry of the key that held it. */
  releaseReservation(page: number): number {
    const entry = this.pool.ownerOf(page);
    this.reservations.delete(page);
    this.clearPageOf(entry);
    this.keys.reserved[entry]!--;
    this.pool.release(page);
    return entry;
  }

  /** isLapsed tells whether page is FREE after key's reservation of it expired, so a late confirmation of (key, page) is accepted. */
  isLapsed(key: string, page: number): boolean {
    return this.lapsed.get(page) === key && this.pool.kindOf(page) === FREE;
  }

  /** lapse remembers that key's reservation of the FREE page `page` expired, for a late confirmation. */
  lapse(page: number, key: string): void {
    this.lapsedPages ??= new Map();
    this.lapsedPages.set(page, key);
  }

  /**
   * confirm makes page USED by key e: it ends e's reservation of page (and
   * returns true) or claims the lapsed page (false). The caller checked
   * that e may confirm it (checkConfirmable).
   */
  confirm(entry: number, page: number): boolean {
    const reserved = this.pool.kindOf(page) === RESERVED && this.pool.ownerOf(page) === entry;
    if (reserved) {
      this.reservations.delete(page);
      this.pool.change(page, entry, USED);
      this.keys.reserved[entry]!--;
    } else {
      this.lapsedPages?.delete(page);
      this.pool.claim(page, entry, USED);
      this.setPageOf(entry, page);
    }
    this.keys.confirmed[entry]!++;
    return reserved;
  }

  /** restoreUsed holds the free page `page` for the confirmed key e (recovery). */
  restoreUsed(entry: number, page: number): void {
    this.pool.claim(page, entry, USED);
    this.setPageOf(entry, page);
    this.keys.confirmed[entry]!++;
  }

  /** dropConfirmed takes key e's USED page `page` away: DRAINING as `drain` says, or without one freed at once. */
  dropConfirmed(entry: number, page: number, drain: Drain | undefined): void {
    this.clearPageOf(entry);
    this.keys.confirmed[entry]!--;
    if (drain === undefined) {
      this.pool.release(page);
      return;
    }
    this.pool.change(page, NO_OWNER, DRAINING);
    this.drains ??= new Map();
    this.drains.set(page, drain);
  }

  /** restoreDraining holds the free page `page` for the deleted `key` until untilMs (recovery). */
  restoreDraining(page: number, untilMs: number, key: string): void {
    this.pool.claim(page, NO_OWNER, DRAINING);
    this.drains ??= new Map();
    this.drains.set(page, { untilMs, key });
  }

  /** holdDrain holds a draining page until untilMs instead (a takeover's restart terms); only ever later. */
  holdDrain(page: number, untilMs: number): void {
    const drain = this.drains?.get(page);
    if (drain !== undefined && drain.untilMs < untilMs) this.drains!.set(page, { untilMs, key: drain.key });
  }

  /** endDrain frees a draining page whose lease ended by untilMs; false when it is not draining until then. */
  endDrain(page: number, untilMs: number): boolean {
    if (this.drains?.get(page)?.untilMs !== untilMs) return false;
    this.drains.delete(page);
    this.pool.release(page);
    return true;
  }

  /** holderKey names the key holding page p (by the registry's names for live keys), undefined when p is FREE. */
  holderKey(page: number, keyOf: (entry: number) => string): string | undefined {
    const kind = this.pool.kindOf(page);
    if (kind === FREE) return undefined;
    return kind === DRAINING ? this.draining.get(page)!.key : keyOf(this.pool.ownerOf(page));
  }

  private setPageOf(entry: number, page: number): void {
    if (this.keys.firstSlot[entry] === -1) {
      this.keys.firstSlot[entry] = this.slot;
      this.keys.firstPage[entry] = page;
      return;
    }
    if (entry >= this.pageByEntry.length) {
      const length = this.pageByEntry.length;
      this.pageByEntry = grown(this.pageByEntry, grownCapacity(length, entry + 1)).fill(-1, length);
    }
    this.pageByEntry[entry] = page;
  }

  private clearPageOf(entry: number): void {
    if (this.keys.firstSlot[entry] === this.slot) this.keys.firstSlot[entry] = -1;
    else this.pageByEntry[entry] = -1;
  }

  /** growPageColumns sizes the reservation columns to the pool's. */
  private growPageColumns(): void {
    this.expiresAt = grown(this.expiresAt, this.pool.capacity);
    this.pageLinks.grow(this.pool.capacity);
  }
}
