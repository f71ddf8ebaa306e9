import type { Linked } from "./record-list.js";

/**
 * KeyRecord is what a namespace knows of a key confirmed on at least one of
 * its ranks.
 *
 * Example, ranks 0 and 1 in slots 0 and 1, world_size 2: after ConfirmWrite
 * of "k" at page 7 on rank 1, pages = [-1, 7] (or [, 7]), confirmedRanks =
 * 1, complete = false; after page 3 on rank 0, pages = [3, 7],
 * confirmedRanks = 2, complete = true.
 *
 * The Linked fields place the record in its namespace's `lru` (complete) or
 * `incomplete` list.
 */
export interface KeyRecord extends Linked {
  readonly key: string;
  /** pages[slot] is the key's confirmed page on the rank in that slot; -1 or missing for none. */
  readonly pages: number[];
  /** confirmedRanks counts the slots with a page. */
  confirmedRanks: number;
  /**
   * complete becomes true when confirmedRanks reaches the namespace's
   * required count (world_size, or the ranks initialized so far when it is
   * unknown) and stays true until the key is dropped.
   */
  complete: boolean;
  /** leaseUntilMs is the end of the key's read lease; 0 for none. */
  leaseUntilMs: number;
  /** reclaimAtMs is when the key is reclaimed if still incomplete (first confirmation + incomplete TTL). */
  reclaimAtMs: number;
}

/** confirmedPage is the key's page on the rank in `slot`, -1 for none. */
export function confirmedPage(record: KeyRecord | undefined, slot: number): number {
  return record?.pages[slot] ?? -1;
}
