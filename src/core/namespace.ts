import { type KeyList, keyListOf } from "./key-list.js";
import { holdsNothing, type KeyRecord, newKeyRecord } from "./key-record.js";
import { hashKey, KeyTable } from "./key-table.js";
import { type EventCounts, type NamespaceCounts, zeroEventCounts } from "./namespace-counters.js";
import { Rank } from "./rank.js";
import { RecordList } from "./record-list.js";

/** SCRATCH holds one key's UTF-8 bytes at a time while a store loads (recordOf). */
const SCRATCH = Buffer.allocUnsafe(4 * 1024);

/**
 * Namespace is an independent page space: its ranks, the registry of its
 * keys and the recency order used for eviction.
 *
 * Invariants: `keys` holds exactly the keys USED or RESERVED on at least one
 * rank (a record names each rank at most once in its `pages` and its
 * `reservations`, and each such page's pool owner on that rank is the
 * record); `confirmedKeys` counts the records with pages; `lru` holds
 * exactly the complete records, least recently used first; `incomplete`
 * holds exactly the other records with pages, by reclaimAtMs (the TTL is
 * one server option, so insertion order is deadline order).
 */
export class Namespace {
  /** ranks are the initialized ranks, by number. */
  readonly ranks = new Map<number, Rank>();
  /** slots are the same ranks by slot, the index that KeyRecord.pages names them by. */
  readonly slots: Rank[] = [];
  /** keys is the key registry: one record per key, whatever it holds on whichever ranks. */
  readonly keys = new KeyTable();
  /** drainingKeys names the records that hold draining pages after their key left the registry. */
  private readonly drainingKeys = new WeakMap<KeyRecord, string>();
  /** confirmedKeys counts the records of `keys` with a confirmed page. */
  confirmedKeys = 0;
  /** lru orders the complete keys, least recently used first. */
  readonly lru = new RecordList<KeyRecord>();
  /** incomplete orders the incomplete keys by reclaimAtMs, earliest first. */
  readonly incomplete = new RecordList<KeyRecord>();
  /** events counts what happened to the namespace since the process started (evictions, expirations, reclaims). */
  readonly events: EventCounts = zeroEventCounts();

  /** counts gives every counter of NAMESPACE_COUNTERS: the sizes of the registry, then the events. */
  counts(): NamespaceCounts {
    return { keys: this.confirmedKeys, completeKeys: this.lru.size, ...this.events };
  }

  constructor(
    readonly name: string,
    /** worldSize is the number of ranks; 0 when unknown. Fixed by the first worker. */
    readonly worldSize: number,
  ) {}

  /** requiredRanks is how many ranks must confirm a key for it to be complete now. */
  get requiredRanks(): number {
    return this.worldSize > 0 ? this.worldSize : this.ranks.size;
  }

  /** addRank creates a rank in the next slot. */
  addRank(rankNo: number, numPages: number): Rank {
    const rank = new Rank(rankNo, numPages, this.slots.length);
    this.ranks.set(rankNo, rank);
    this.slots.push(rank);
    return rank;
  }

  /** find returns the record of key i of a call, undefined for an unknown key. */
  find(keys: KeyList, i: number): KeyRecord | undefined {
    return this.keys.find(keys.bytes, keys.starts[i]!, keys.ends[i]!, keys.hash(i));
  }

  /** findAll returns the record of every key of a call (undefined for an unknown key). */
  findAll(keys: KeyList): (KeyRecord | undefined)[] {
    const records = new Array<KeyRecord | undefined>(keys.length);
    this.keys.findAll(keys.bytes, keys.starts, keys.ends, keys.hashes(), records);
    return records;
  }

  /** recordAt finds the record of key i of a call, registering a new one when the key is unknown. */
  recordAt(keys: KeyList, i: number): KeyRecord {
    return this.registered(keys.bytes, keys.starts[i]!, keys.ends[i]!, keys.hash(i));
  }

  /**
   * recordOf is recordAt for a key given as a string (recovery, a record at
   * a time): it encodes the key into one scratch buffer, so loading a store
   * makes no buffer, list or hash array per key.
   */
  recordOf(key: string): KeyRecord {
    // A UTF-16 unit is at most 3 UTF-8 bytes, so a key that may not fit takes the general path.
    if (key.length * 3 > SCRATCH.length) return this.recordAt(keyListOf([key]), 0);
    const end = SCRATCH.write(key, 0, "utf8");
    return this.registered(SCRATCH, 0, end, hashKey(SCRATCH, 0, end));
  }

  /** registered finds the record of the key at bytes[start .. end), registering a new one when the key is unknown. */
  private registered(bytes: Buffer, start: number, end: number, hash: number): KeyRecord {
    const record = this.keys.find(bytes, start, end, hash);
    if (record !== undefined) return record;
    const created = newKeyRecord();
    created.entry = this.keys.insert(created, bytes, start, end, hash);
    return created;
  }

  /** lookup finds the record of a key given as a string (inspection and tests). */
  lookup(key: string): KeyRecord | undefined {
    return this.find(keyListOf([key]), 0);
  }

  /** keyOf names a record's key: from the registry, or for a deleted key whose pages still drain, from drainingKeys. */
  keyOf(record: KeyRecord): string {
    return record.entry >= 0 ? this.keys.keyOf(record.entry) : this.drainingKeys.get(record)!;
  }

  /** nameDraining keeps the name of a key whose pages drain after it was dropped, for as long as they hold the record. */
  nameDraining(record: KeyRecord, key: string): void {
    this.drainingKeys.set(record, key);
  }

  /** forgetIfEmpty drops a record that holds nothing from the registry. */
  forgetIfEmpty(record: KeyRecord): void {
    if (!holdsNothing(record)) return;
    this.keys.delete(record.entry);
    record.entry = -1;
  }

  /** touch marks a complete key as most recently used. */
  touch(record: KeyRecord): void {
    if (!record.complete) return;
    this.lru.moveToBack(record);
  }
}
