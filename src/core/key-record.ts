/**
 * KeyRecord is what a namespace knows of a key confirmed on at least one of
 * its ranks. The key's pages live in each Rank's `used` map.
 */
export interface KeyRecord {
  readonly key: string;
  /** confirmedRanks counts the ranks where the key is USED. */
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
