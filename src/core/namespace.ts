import { IndexList } from "./index-list.js";
import { KeyColumns } from "./key-columns.js";
import { type KeyList, keyListOf } from "./key-list.js";
import { hashKey, KEY_HASH_SEED, KeyTable, viewOf } from "./key-table.js";
import { type EventCounts, type NamespaceCounts, zeroEventCounts } from "./namespace-counters.js";
import { Rank } from "./rank.js";

/** SCRATCH holds one key's UTF-8 bytes at a time while a store loads (entryOf). */
const SCRATCH = Buffer.allocUnsafe(4 * 1024);
const SCRATCH_VIEW = viewOf(SCRATCH);

/**
 * Namespace is an independent page space: its ranks, the registry of its
 * keys, their columns and the recency order used for eviction. A key is
 * known by its registry entry, a small integer that indexes the columns
 * (KeyColumns) and every rank's pageOf.
 *
 * Invariants: `keys` holds exactly the keys USED or RESERVED on at least one
 * rank; `confirmedKeys` counts the entries with a confirmed page; `lru`
 * holds exactly the complete keys, least recently used first (a key is
 * complete exactly while it is in `lru`); `incomplete` holds exactly the
 * other keys with confirmed pages, by reclaimAtMs (the TTL is one server
 * option, so insertion order is deadline order).
 */
export class Namespace {
  /** ranks are the initialized ranks, by number. */
  readonly ranks = new Map<number, Rank>();
  /** slots are the same ranks in the order they were added. */
  readonly slots: Rank[] = [];
  /** keys is the key registry: key bytes → entry. */
  readonly keys = new KeyTable();
  /** columns hold each key's counts, read lease and reclaim deadline, by entry. */
  readonly columns = new KeyColumns();
  /** confirmedKeys counts the entries of `keys` with a confirmed page. */
  confirmedKeys = 0;
  /** lru orders the complete keys, least recently used first. */
  readonly lru = new IndexList(this.columns.links, 1);
  /** incomplete orders the incomplete keys by reclaimAtMs, earliest first. */
  readonly incomplete = new IndexList(this.columns.links, 2);
  /** events counts what happened to the namespace since the process started (evictions, expirations, reclaims). */
  readonly events: EventCounts = zeroEventCounts();

  constructor(
    readonly name: string,
    /** worldSize is the number of ranks; 0 when unknown. Fixed by the first worker. */
    readonly worldSize: number,
  ) {}

  /** counts gives every counter of NAMESPACE_COUNTERS: the sizes of the registry, then the events. */
  counts(): NamespaceCounts {
    return { keys: this.confirmedKeys, completeKeys: this.lru.size, ...this.events };
  }

  /** requiredRanks is how many ranks must confirm a key for it to be complete now. */
  get requiredRanks(): number {
    return this.worldSize > 0 ? this.worldSize : this.ranks.size;
  }

  /** addRank creates a rank in the next slot. */
  addRank(rankNo: number, numPages: number): Rank {
    const rank = new Rank(rankNo, numPages, this.slots.length, this.columns);
    this.ranks.set(rankNo, rank);
    this.slots.push(rank);
    return rank;
  }

  /** findAll returns the entry of every key of a call (-1 for an unknown key). */
  findAll(keys: KeyList): Int32Array {
    const found = new Int32Array(keys.length);
    this.keys.findAll(keys.bytes, keys.starts, keys.ends, keys.hashes(), found, keys.view);
    return found;
  }

  /** entryAt finds the entry of key i of a call, registering the key when it is unknown. */
  entryAt(keys: KeyList, i: number): number {
    return this.registered(keys.bytes, keys.starts[i]!, keys.ends[i]!, keys.hash(i), keys.view);
  }

  /**
   * entryOf is entryAt for a key given as a string (recovery, a record at a
   * time): it encodes the key into one scratch buffer, so loading a store
   * makes no buffer, list or hash array per key.
   */
  entryOf(key: string): number {
    // A UTF-16 unit is at most 3 UTF-8 bytes, so a key that may not fit takes the general path.
    if (key.length * 3 > SCRATCH.length) return this.entryAt(keyListOf([key]), 0);
    const end = SCRATCH.write(key, 0, "utf8");
    return this.registered(SCRATCH, 0, end, hashKey(SCRATCH, 0, end, KEY_HASH_SEED, SCRATCH_VIEW), SCRATCH_VIEW);
  }

  /** registered finds the entry of the key at bytes[start .. end), registering the key, holding nothing, when it is unknown. */
  private registered(bytes: Buffer, start: number, end: number, hash: number, view: DataView): number {
    const found = this.keys.find(bytes, start, end, hash, view);
    if (found >= 0) return found;
    const entry = this.keys.insert(bytes, start, end, hash, view);
    this.columns.fresh(entry);
    return entry;
  }

  /** lookup finds the entry of a key given as a string, -1 when it is not registered (inspection and tests). */
  lookup(key: string): number {
    const keys = keyListOf([key]);
    return this.keys.find(keys.bytes, keys.starts[0]!, keys.ends[0]!, keys.hash(0));
  }

  /** keyOf names the key of a live entry. */
  keyOf(entry: number): string {
    return this.keys.keyOf(entry);
  }

  /** isComplete tells whether key e is complete: confirmed on the required ranks, and not dropped since. */
  isComplete(entry: number): boolean {
    return this.lru.has(entry);
  }

  /** confirmedPages lists key e's confirmed pages as (rank number, page) pairs, by slot. */
  confirmedPages(entry: number): number[] {
    const pages: number[] = [];
    // The count says when the last page is found: the ranks after it are not read.
    for (let slot = 0, left = this.columns.confirmed[entry]!; left > 0; slot++) {
      const rank = this.slots[slot]!;
      const page = rank.confirmedPage(entry);
      if (page < 0) continue;
      pages.push(rank.rank, page);
      left--;
    }
    return pages;
  }

  /** forgetIfEmpty drops a key that holds nothing from the registry. */
  forgetIfEmpty(entry: number): void {
    if (this.columns.holdsNothing(entry)) this.keys.delete(entry);
  }

  /** touch marks a complete key as most recently used. */
  touch(entry: number): void {
    if (this.lru.has(entry)) this.lru.moveToBack(entry);
  }
}
