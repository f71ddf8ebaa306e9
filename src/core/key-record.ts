import type { Linked } from "./record-list.js";

/**
 * Reservation is a RESERVED page: handed to its record's key on the rank in
 * `slot`, write in flight until `expiresAtMs`. The Linked fields place it in
 * its rank's expiry order.
 */
export interface Reservation extends Linked {
  readonly record: KeyRecord;
  readonly slot: number;
  readonly page: number;
  /** nextOfKey is the record's next reservation (on another rank): a record chains its reservations, no array per key. */
  nextOfKey: Reservation | undefined;
  /** expiresAtMs is when the page returns to FREE if not confirmed (ms since the epoch); renewed by a repeated BatchAllocate. */
  expiresAtMs: number;
}

/**
 * KeyRecord is all a namespace knows of a key: its confirmed pages and its
 * reservations in flight, in one record, so that a call finds everything
 * about a key with one registry lookup. The key itself is kept as bytes by
 * the registry (Namespace.keyOf names it), not as a string per record.
 *
 * Example, ranks 0 and 1 in slots 0 and 1, world_size 2: BatchAllocate of
 * "k" on rank 1 gives it a reservation of page 7 at slot 1; ConfirmWrite of
 * (k, 7) on rank 1 moves it to pages = [1, 7], complete = false; after page
 * 3 on rank 0, pages = [1, 7, 0, 3], complete = true.
 *
 * The Linked fields place a record with confirmed pages in its namespace's
 * `lru` (complete) or `incomplete` list.
 */
export interface KeyRecord extends Linked {
  /** entry is the record's entry in its namespace's KeyTable, -1 while it is in none. */
  entry: number;
  /**
   * pages holds (slot, page) pairs, one per rank the key is confirmed on, in
   * confirmation order: a key costs memory for the ranks it is on, not for
   * every rank of its namespace. A slot appears at most once.
   */
  pages: number[];
  /** firstReservation starts the chain (by nextOfKey) of the key's RESERVED pages: at most one per slot, never at a slot in `pages`. */
  firstReservation: Reservation | undefined;
  /**
   * complete becomes true when the key is confirmed on the namespace's
   * required count of ranks (world_size, or the ranks initialized so far
   * when it is unknown) and stays true until the key is dropped.
   */
  complete: boolean;
  /** leaseUntilMs is the end of the key's read lease; 0 for none. */
  leaseUntilMs: number;
  /** reclaimAtMs is when the key is reclaimed if still incomplete (first confirmation + incomplete TTL). */
  reclaimAtMs: number;
}

/** NO_PAGES is the pages of every record without any: shared, never written (addPage replaces it), so a reservation costs no array. */
export const NO_PAGES: number[] = Object.freeze([]) as unknown as number[];

/** newKeyRecord makes the record of a key that holds nothing yet; the registry files it (and keeps its name). */
export function newKeyRecord(): KeyRecord {
  return {
    entry: -1,
    pages: NO_PAGES,
    firstReservation: undefined,
    complete: false,
    leaseUntilMs: 0,
    reclaimAtMs: 0,
    prev: undefined,
    next: undefined,
    list: undefined,
  };
}

/** confirmedPage is the key's page on the rank in `slot`, -1 for none. */
export function confirmedPage(record: KeyRecord | undefined, slot: number): number {
  if (record === undefined) return -1;
  const pages = record.pages;
  for (let i = 0; i < pages.length; i += 2) if (pages[i] === slot) return pages[i + 1]!;
  return -1;
}

/** reservationAt is the key's reservation on the rank in `slot`, undefined for none. */
export function reservationAt(record: KeyRecord | undefined, slot: number): Reservation | undefined {
  if (record === undefined) return undefined;
  let reservation = record.firstReservation;
  while (reservation !== undefined && reservation.slot !== slot) reservation = reservation.nextOfKey;
  return reservation;
}

/** confirmedRanks is the number of ranks the key is confirmed on. */
export function confirmedRanks(record: KeyRecord): number {
  return record.pages.length >> 1;
}

/** addPage records the key's page on the rank in `slot`, where it has none. The first pair gets an array of its size (push would reserve 17). */
export function addPage(record: KeyRecord, slot: number, page: number): void {
  if (record.pages.length === 0) record.pages = [slot, page];
  else record.pages.push(slot, page);
}

/** linkReservation adds a reservation to its record's chain. */
export function linkReservation(reservation: Reservation): void {
  reservation.nextOfKey = reservation.record.firstReservation;
  reservation.record.firstReservation = reservation;
}

/** unlinkReservation takes a reservation off its record's chain. */
export function unlinkReservation(reservation: Reservation): void {
  const record = reservation.record;
  if (record.firstReservation === reservation) record.firstReservation = reservation.nextOfKey;
  else {
    let before = record.firstReservation!;
    while (before.nextOfKey !== reservation) before = before.nextOfKey!;
    before.nextOfKey = reservation.nextOfKey;
  }
  reservation.nextOfKey = undefined;
}

/** holdsNothing tells whether the key has neither a confirmed page nor a reservation, so the registry can forget it. */
export function holdsNothing(record: KeyRecord): boolean {
  return record.pages.length === 0 && record.firstReservation === undefined;
}
