import { PagePool } from "./page-pool.js";

/** Reservation is a RESERVED page: handed to `key`, write in flight until `expiresAtMs`. */
export interface Reservation {
  readonly key: string;
  readonly page: number;
  /** expiresAtMs is when the page returns to FREE if not confirmed (ms since the epoch); renewed by a repeated BatchAllocate. */
  expiresAtMs: number;
}

/** PageState is the state of one page. */
export type PageState = "free" | "reserved" | "used";

/**
 * Rank is the page file of one tensor-parallel rank of a namespace. The
 * confirmed pages of keys are kept on the keys' records (KeyRecord.pages,
 * at this rank's `slot`), so a rank knows holders, reservations and drains.
 *
 * Invariants (asserted by the property tests):
 * - every page is in exactly one state, derived from the pool and the maps:
 *   FREE      pool.ownerOf(p) is undefined;
 *   RESERVED  pool.ownerOf(p) = k and reserved.get(k).page = p;
 *   USED      pool.ownerOf(p) = k otherwise: either k's record has p at
 *             this slot (confirmed), or draining.has(p) (k was deleted while
 *             read-leased; p is freed when the lease ends);
 * - so free + reserved + used = numPages, and no page has two keys;
 * - a key has at most one reservation and one confirmed page on a rank, and
 *   never both;
 * - lapsed.get(p) = k only while p is FREE: k's reservation of p expired
 *   unconfirmed, and a late ConfirmWrite of (k, p) is still accepted.
 */
export class Rank {
  readonly pool: PagePool;
  /**
   * reserved maps a key to its reservation on this rank, in expiry order:
   * the TTL is one server option, so appending (and re-appending on renewal)
   * keeps the earliest expiry first, and expiring is a scan of the front.
   */
  readonly reserved = new Map<string, Reservation>();
  /** lapsed maps a FREE page to the key whose reservation of it expired. */
  readonly lapsed = new Map<number, string>();
  /** draining maps a page of a deleted, read-leased key to the end of the lease (ms since the epoch). */
  readonly draining = new Map<number, number>();

  constructor(
    readonly rank: number,
    readonly numPages: number,
    /** slot is the rank's index in its namespace, by which KeyRecord.pages names it. */
    readonly slot: number,
  ) {
    this.pool = new PagePool(numPages);
  }

  /** pageState derives the state of page p. */
  pageState(page: number): PageState {
    const key = this.pool.ownerOf(page);
    if (key === undefined) return "free";
    return this.reserved.get(key)?.page === page ? "reserved" : "used";
  }

  /** reservedPages is the number of RESERVED pages. */
  get reservedPages(): number {
    return this.reserved.size;
  }

  /** usedPages is the number of USED pages, draining ones included. */
  get usedPages(): number {
    return this.pool.heldPages - this.reserved.size;
  }

  /** reserveFree reserves a free page for key; undefined when none is free. */
  reserveFree(key: string, expiresAtMs: number): Reservation | undefined {
    const page = this.pool.take(key);
    if (page < 0) return undefined;
    if (this.lapsed.size > 0) this.lapsed.delete(page);
    return this.addReservation(key, page, expiresAtMs);
  }

  /** renew moves a reservation's expiry to expiresAtMs, at the back of the expiry order. */
  renew(reservation: Reservation, expiresAtMs: number): void {
    reservation.expiresAtMs = expiresAtMs;
    this.reserved.delete(reservation.key);
    this.reserved.set(reservation.key, reservation);
  }

  /** expireReservations frees, and remembers as lapsed, every reservation expired by nowMs; returns them. */
  expireReservations(nowMs: number): Reservation[] | undefined {
    let expired: Reservation[] | undefined;
    for (const reservation of this.reserved.values()) {
      if (reservation.expiresAtMs > nowMs) break;
      this.releaseReservation(reservation, true);
      expired ??= [];
      expired.push(reservation);
    }
    return expired;
  }

  /** firstExpiryMs is the earliest reservation expiry, Infinity for none. */
  firstExpiryMs(): number {
    for (const reservation of this.reserved.values()) return reservation.expiresAtMs;
    return Infinity;
  }

  /** sortReservations restores the expiry order after reservations were restored in page order. */
  sortReservations(): void {
    const sorted = [...this.reserved.values()].sort((a, b) => a.expiresAtMs - b.expiresAtMs);
    this.reserved.clear();
    for (const reservation of sorted) this.reserved.set(reservation.key, reservation);
  }

  /** restoreReservation reserves the free page `page` for key (recovery). */
  restoreReservation(key: string, page: number, expiresAtMs: number): Reservation {
    this.pool.claim(page, key);
    return this.addReservation(key, page, expiresAtMs);
  }

  private addReservation(key: string, page: number, expiresAtMs: number): Reservation {
    const reservation: Reservation = { key, page, expiresAtMs };
    this.reserved.set(key, reservation);
    return reservation;
  }

  /**
   * isConfirmable tells whether (key, page) may be confirmed, given the page
   * the key has confirmed on this rank (-1 for none): it is that page (a
   * repeat), matches the key's reservation, or matches a lapsed reservation
   * whose page is still FREE.
   */
  isConfirmable(key: string, page: number, confirmedPage: number): boolean {
    if (confirmedPage >= 0) return confirmedPage === page;
    const reservation = this.reserved.get(key);
    if (reservation !== undefined) return reservation.page === page;
    return this.lapsed.get(page) === key && this.pool.ownerOf(page) === undefined;
  }

  /**
   * confirm makes page USED by key: it ends the key's reservation of page
   * (and returns true) or claims the lapsed page (false). The caller checked
   * isConfirmable and records the page on the key's record. `key` should be
   * the record's copy of the key string, so that every rank shares one copy.
   */
  confirm(key: string, page: number): boolean {
    if (this.reserved.get(key)?.page === page) {
      this.reserved.delete(key);
      this.pool.setOwner(page, key);
      return true;
    }
    this.lapsed.delete(page);
    this.pool.claim(page, key);
    return false;
  }

  /** restoreUsed holds the free page `page` for a confirmed key (recovery). */
  restoreUsed(key: string, page: number): void {
    this.pool.claim(page, key);
  }

  /** restoreDraining holds the free page `page` for a deleted key until untilMs (recovery). */
  restoreDraining(key: string, page: number, untilMs: number): void {
    this.pool.claim(page, key);
    this.draining.set(page, untilMs);
  }

  /** releaseReservation makes a RESERVED page FREE; `lapse` remembers it for a late confirmation. */
  releaseReservation(reservation: Reservation, lapse: boolean): void {
    this.reserved.delete(reservation.key);
    this.pool.release(reservation.page);
    if (lapse) this.lapsed.set(reservation.page, reservation.key);
  }

  /** dropConfirmed gives up a dropped key's page: freed at once, or draining until untilMs when that is later than nowMs. */
  dropConfirmed(page: number, untilMs: number, nowMs: number): void {
    if (untilMs > nowMs) this.draining.set(page, untilMs);
    else this.pool.release(page);
  }

  /** endDrain frees a draining page whose lease ended by untilMs; false when it is not draining until then. */
  endDrain(page: number, untilMs: number): boolean {
    if (this.draining.get(page) !== untilMs) return false;
    this.draining.delete(page);
    this.pool.release(page);
    return true;
  }
}
