import { type KeyRecord, linkReservation, type Reservation, reservationAt, unlinkReservation } from "./key-record.js";
import { PagePool } from "./page-pool.js";
import { RecordList } from "./record-list.js";

/** PageState is the state of one page. */
export type PageState = "free" | "reserved" | "used";

/**
 * Rank is the page file of one tensor-parallel rank of a namespace. What a
 * key holds on the rank (its confirmed page, its reservation) is kept on the
 * key's record at this rank's `slot`; the rank keeps the page holders, the
 * expiry order of reservations, lapses and drains.
 *
 * Invariants (asserted by the property tests):
 * - every page is in exactly one state, derived from the pool and the records:
 *   FREE      pool.ownerOf(p) is undefined;
 *   RESERVED  pool.ownerOf(p) = r and r has a reservation of p at this slot;
 *   USED      pool.ownerOf(p) = r otherwise: either r has p at this slot in
 *             its pages (confirmed), or draining.has(p) (r was deleted while
 *             read-leased; p is freed when the lease ends);
 * - so free + reserved + used = numPages, and no page has two keys;
 * - a key has at most one reservation and one confirmed page on a rank, and
 *   never both;
 * - `reservations` holds exactly the reservations at this slot;
 * - lapsed.get(p) = k only while p is FREE: k's reservation of p expired
 *   unconfirmed, and a late ConfirmWrite of (k, p) is still accepted.
 */
export class Rank {
  readonly pool: PagePool;
  /**
   * reservations are this rank's reservations in expiry order: the TTL is
   * one server option, so appending (and moving to the back on renewal)
   * keeps the earliest expiry first, and expiring is a scan of the front.
   */
  readonly reservations = new RecordList<Reservation>();
  /** lapsed maps a FREE page to the key whose reservation of it expired. */
  readonly lapsed = new Map<number, string>();
  /** draining maps a page of a deleted, read-leased key to the end of the lease (ms since the epoch). */
  readonly draining = new Map<number, number>();

  constructor(
    readonly rank: number,
    readonly numPages: number,
    /** slot is the rank's index in its namespace, by which key records name it. */
    readonly slot: number,
  ) {
    this.pool = new PagePool(numPages);
  }

  /** pageState derives the state of page p. */
  pageState(page: number): PageState {
    const owner = this.pool.ownerOf(page);
    if (owner === undefined) return "free";
    return reservationAt(owner, this.slot)?.page === page ? "reserved" : "used";
  }

  /** reservationOf is the reservation of page p, undefined when p is not RESERVED. */
  reservationOf(page: number): Reservation | undefined {
    const owner = this.pool.ownerOf(page);
    if (owner === undefined) return undefined;
    const reservation = reservationAt(owner, this.slot);
    return reservation?.page === page ? reservation : undefined;
  }

  /** reservedPages is the number of RESERVED pages. */
  get reservedPages(): number {
    return this.reservations.size;
  }

  /** usedPages is the number of USED pages, draining ones included. */
  get usedPages(): number {
    return this.pool.heldPages - this.reservations.size;
  }

  /** reserveFree reserves a free page for the record's key; undefined when none is free. */
  reserveFree(record: KeyRecord, expiresAtMs: number): Reservation | undefined {
    const page = this.pool.take(record);
    if (page < 0) return undefined;
    if (this.lapsed.size > 0) this.lapsed.delete(page);
    return this.addReservation(record, page, expiresAtMs);
  }

  /** renew moves a reservation's expiry to expiresAtMs, at the back of the expiry order. */
  renew(reservation: Reservation, expiresAtMs: number): void {
    reservation.expiresAtMs = expiresAtMs;
    this.reservations.moveToBack(reservation);
  }

  /** expireReservations frees every reservation expired by nowMs and returns them; the caller marks them lapsed (lapse). */
  expireReservations(nowMs: number): Reservation[] | undefined {
    let expired: Reservation[] | undefined;
    for (const reservation of this.reservations) {
      if (reservation.expiresAtMs > nowMs) break;
      this.releaseReservation(reservation);
      expired ??= [];
      expired.push(reservation);
    }
    return expired;
  }

  /** firstExpiryMs is the earliest reservation expiry, Infinity for none. */
  firstExpiryMs(): number {
    return this.reservations.first?.expiresAtMs ?? Infinity;
  }

  /** sortReservations restores the expiry order after reservations were restored in page order. */
  sortReservations(): void {
    const sorted = [...this.reservations].sort((a, b) => a.expiresAtMs - b.expiresAtMs);
    for (const reservation of sorted) this.reservations.moveToBack(reservation);
  }

  /** restoreReservation reserves the free page `page` for the record's key (recovery). */
  restoreReservation(record: KeyRecord, page: number, expiresAtMs: number): Reservation {
    this.pool.claim(page, record);
    return this.addReservation(record, page, expiresAtMs);
  }

  private addReservation(record: KeyRecord, page: number, expiresAtMs: number): Reservation {
    const reservation: Reservation = { record, slot: this.slot, page, nextOfKey: undefined, expiresAtMs, prev: undefined, next: undefined, list: undefined };
    this.reservations.add(reservation);
    linkReservation(reservation);
    return reservation;
  }

  /** isLapsed tells whether page is FREE after key's reservation of it expired, so a late confirmation of (key, page) is accepted. */
  isLapsed(key: string, page: number): boolean {
    return this.lapsed.get(page) === key && this.pool.ownerOf(page) === undefined;
  }

  /**
   * confirm makes page USED by the record's key: it ends the key's
   * reservation of page (and returns true) or claims the lapsed page
   * (false). The caller checked isConfirmable and records the page on the record.
   */
  confirm(record: KeyRecord, page: number, reservation: Reservation | undefined): boolean {
    if (reservation?.page === page) {
      this.endReservation(reservation);
      return true;
    }
    this.lapsed.delete(page);
    this.pool.claim(page, record);
    return false;
  }

  /** restoreUsed holds the free page `page` for a confirmed key (recovery). */
  restoreUsed(record: KeyRecord, page: number): void {
    this.pool.claim(page, record);
  }

  /** restoreDraining holds the free page `page` for a deleted key until untilMs (recovery). */
  restoreDraining(record: KeyRecord, page: number, untilMs: number): void {
    this.pool.claim(page, record);
    this.draining.set(page, untilMs);
  }

  /** releaseReservation makes a RESERVED page FREE. */
  releaseReservation(reservation: Reservation): void {
    this.endReservation(reservation);
    this.pool.release(reservation.page);
  }

  /** lapse remembers that key's reservation of the FREE page `page` expired, for a late confirmation. */
  lapse(page: number, key: string): void {
    this.lapsed.set(page, key);
  }

  /** endReservation takes a reservation off the rank and its record; its page stays held. */
  private endReservation(reservation: Reservation): void {
    this.reservations.delete(reservation);
    unlinkReservation(reservation);
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
