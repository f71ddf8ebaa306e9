import type { Linked } from "./record-list.js";

/**
 * KeyRecord is what a namespace knows of a key confirmed on at least one of
 * its ranks.
 *
 * Example, ranks 0 and 1 in slots 0 and 1, world_size 2: after ConfirmWrite
 * of "k" at page 7 on rank 1, pages = [1, 7], complete = false; after page 3
 * on rank 0, pages = [1, 7, 0, 3], complete = true.
 *
 * The Linked fields place the record in its namespace's `lru` (complete) or
 * `incomplete` list.
 */
export interface KeyRecord extends Linked {
  readonly key: string;
  /**
   * pages holds (slot, page) pairs, one per rank the key is confirmed on, in
   * confirmation order: a key costs memory for the ranks it is on, not for
   * every rank of its namespace. A slot appears at most once.
   */
  readonly pages: number[];
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

/** confirmedPage is the key's page on the rank in `slot`, -1 for none. */
export function confirmedPage(record: KeyRecord | undefined, slot: number): number {
  if (record === undefined) return -1;
  const pages = record.pages;
  for (let i = 0; i < pages.length; i += 2) if (pages[i] === slot) return pages[i + 1]!;
  return -1;
}

/** confirmedRanks is the number of ranks the key is confirmed on. */
export function confirmedRanks(record: KeyRecord): number {
  return record.pages.length >> 1;
}

/** addPage records the key's page on the rank in `slot`, where it has none. */
export function addPage(record: KeyRecord, slot: number, page: number): void {
  record.pages.push(slot, page);
}
