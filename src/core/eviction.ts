import type { Namespace } from "./namespace.js";
import type { Rank } from "./rank.js";
import type { Registry } from "./registry.js";

/** NO_BATCH is the batch of an eviction that no call waits for (evictAhead). */
const NO_BATCH: ReadonlySet<number> = new Set();

/**
 * Eviction frees pages by dropping complete keys: one at a time for a
 * BatchAllocate that finds no free page (evictOne), and ahead of need, in
 * steps between calls, on the ranks a call left past the high watermark
 * (evictAhead), down to the low one.
 */
export class Eviction {
  /** crowded are the ranks past the high watermark that evictAhead has not brought down yet, with their namespaces. */
  private readonly crowded = new Map<Rank, Namespace>();

  constructor(private readonly registry: Registry) {}

  /**
   * evictOne drops one complete key that holds a page of `rank`, has no read
   * lease (leased keys are in no list it reads) and is not in `batch`: the
   * least recently used of the orphans, else of the reachable leaves, else
   * of the rest (with children: the LRU fallback, or every complete key
   * under plain LRU). False when none is evictable. Each list is read from
   * its oldest key, skipping the ones that may not go.
   */
  evictOne(ns: Namespace, rank: Rank, batch: ReadonlySet<number>, now: number): boolean {
    ns.returnLeases(now);
    for (const { list, cause } of ns.evictionOrder) {
      for (let entry = list.first; entry >= 0; entry = list.after(entry)) {
        if (batch.has(entry) || rank.confirmedPage(entry) < 0) continue;
        this.registry.dropKey(ns, entry, now);
        ns.events.evictions++;
        ns.events[cause]++;
        return true;
      }
    }
    return false;
  }

  /** noteCrowding marks a rank crowded when more than the high watermark of its pages are held (evictAhead), after a BatchAllocate or ConfirmWrite on it; never one whose low watermark is no page. */
  noteCrowding(ns: Namespace, rank: Rank): void {
    const { evictLowWatermark, evictHighWatermark } = this.registry.options;
    // A rank so small that the low watermark holds no page (1 page at 0.90) is never evicted ahead: that would empty it.
    if (heldPagesAt(rank, evictLowWatermark) === 0) return;
    if (rank.heldPages > heldPagesAt(rank, evictHighWatermark)) this.crowded.set(rank, ns);
  }

  /** forget stops looking at a rank that was dropped. */
  forget(rank: Rank): void {
    this.crowded.delete(rank);
  }

  /** pending tells whether a rank is crowded: evictAhead has work. */
  get pending(): boolean {
    return this.crowded.size > 0;
  }

  /**
   * evictAhead evicts (evictOne) from the crowded ranks, at most maxKeys
   * keys, until each holds no more than the low watermark of its pages. A
   * rank leaves the crowded set once down, or once nothing on it is
   * evictable (the next call that leaves it crowded marks it again).
   * Returns the number of keys evicted.
   */
  evictAhead(maxKeys: number): number {
    const now = this.registry.clock();
    let evicted = 0;
    for (const [rank, ns] of this.crowded) {
      const target = heldPagesAt(rank, this.registry.options.evictLowWatermark);
      let stuck = false;
      while (rank.heldPages > target && evicted < maxKeys) {
        if (!this.evictOne(ns, rank, NO_BATCH, now)) {
          stuck = true;
          break;
        }
        evicted++;
      }
      if (stuck || rank.heldPages <= target) this.crowded.delete(rank);
      if (evicted >= maxKeys) break;
    }
    return evicted;
  }
}

/** heldPagesAt is the number of held pages of a rank at a watermark (a fraction of its pages). */
function heldPagesAt(rank: Rank, watermark: number): number {
  // The epsilon keeps 0.95 × 100 at 95 pages, whichever way the product rounds.
  return Math.floor(rank.ownedPages * watermark + 1e-9);
}
