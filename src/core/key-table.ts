import { grown, grownCapacity } from "./grown.js";

/**
 * KEY_HASH_SEED is drawn once per process: a client that does not know it
 * cannot pick keys that fill one run of buckets (hash flooding), as it
 * could against a fixed seed.
 */
export const KEY_HASH_SEED = crypto.getRandomValues(new Uint32Array(1))[0]!;

/**
 * hashKey is MurmurHash3 (x86, 32 bits) of bytes[start .. end) with a seed,
 * four bytes per step. Written here because the libraries take a whole
 * array or a string, so a key would need a view or a string per lookup,
 * which is what this table avoids; test/unit/core/key-table.test.ts pins it to
 * the `murmurhash` package. `view` is a DataView of `bytes` (made when
 * absent): a caller hashing many keys of one buffer passes one, since its
 * 4-byte loads are faster than assembling each word from bytes
 * (bench/README, "The key columns").
 */
export function hashKey(bytes: Uint8Array, start: number, end: number, seed = KEY_HASH_SEED, view = viewOf(bytes)): number {
  let h = seed | 0;
  let i = start;
  for (; i + 4 <= end; i += 4) h = mixBlock(h, view.getInt32(i, true));
  const rest = end - i;
  let k = 0;
  if (rest > 0) k = bytes[i]!;
  if (rest > 1) k |= bytes[i + 1]! << 8;
  if (rest > 2) k |= bytes[i + 2]! << 16;
  return finish(h, k, rest, end - start);
}

/**
 * PrefixedHash is hashKey (seed 0) of a prefix followed by each key, with
 * the prefix's whole blocks mixed once and no copy of prefix and key
 * together: a shard's keys are hashed after their namespace (keyShards).
 */
export class PrefixedHash {
  /** h is the state after the prefix's whole blocks; tail and tailBytes are its last, partial block. */
  private readonly h: number;
  private readonly tail: number;
  private readonly tailBytes: number;

  constructor(private readonly prefix: Uint8Array) {
    const whole = prefix.length & ~3;
    this.h = whole === 0 ? 0 : hashBlocks(prefix, 0, whole);
    this.tailBytes = prefix.length - whole;
    let tail = 0;
    for (let i = 0; i < this.tailBytes; i++) tail |= prefix[whole + i]! << (8 * i);
    this.tail = tail;
  }

  /** of is hashKey of the prefix and bytes[start .. end); `view` is a DataView of `bytes`. */
  of(bytes: Uint8Array, start: number, end: number, view: DataView): number {
    let h = this.h;
    let k = this.tail;
    let n = this.tailBytes;
    let i = start;
    if (n > 0) {
      for (; n < 4 && i < end; n++) k |= bytes[i++]! << (8 * n);
      if (n === 4) {
        h = mixBlock(h, k);
        k = 0;
        n = 0;
      }
    }
    if (n === 0) {
      for (; i + 4 <= end; i += 4) h = mixBlock(h, view.getInt32(i, true));
      for (; i < end; n++) k |= bytes[i++]! << (8 * n);
    }
    return finish(h, k, n, this.prefix.length + end - start);
  }
}

/** hashBlocks is the state of hashKey (seed 0) after the whole blocks of bytes[start .. end), a multiple of 4 long. */
function hashBlocks(bytes: Uint8Array, start: number, end: number): number {
  const view = viewOf(bytes);
  let h = 0;
  for (let i = start; i < end; i += 4) h = mixBlock(h, view.getInt32(i, true));
  return h;
}

/** mixBlock is MurmurHash3's step for one 4-byte block k. */
function mixBlock(h: number, block: number): number {
  let k = Math.imul(block, 0xcc9e2d51);
  k = Math.imul((k << 15) | (k >>> 17), 0x1b873593);
  h ^= k;
  h = (h << 13) | (h >>> 19);
  return (Math.imul(h, 5) + 0xe6546b64) | 0;
}

/** finish is MurmurHash3's end: the last `rest` bytes (k, little-endian), the length, the final mix. */
function finish(h: number, k: number, rest: number, length: number): number {
  if (rest > 0) {
    k = Math.imul(k, 0xcc9e2d51);
    h ^= Math.imul((k << 15) | (k >>> 17), 0x1b873593);
  }
  h ^= length;
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  return h ^ (h >>> 16);
}

/** viewOf is a DataView over exactly the bytes of `bytes`. */
export function viewOf(bytes: Uint8Array): DataView {
  return new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

const MIN_BUCKETS = 64;

/**
 * SAME_HASH_LIMIT is how many entries with one full hash the buckets hold.
 * MurmurHash3 has collisions that hold under every seed (bench/harness/
 * murmur-collisions.ts makes them), so a client could send thousands of
 * keys with one hash and make every lookup among them compare them all.
 * Keys past the limit go to `overflow`, a Map keyed by their bytes, whose
 * string hashing V8 seeds per process. Nine keys with one full hash do not
 * happen by chance: among 4M keys, C(4M, 9) / 2^256, about 6 × 10^-24, are expected.
 */
export const SAME_HASH_LIMIT = 8;
const MIN_ARENA = 4_096;

/**
 * KeyTable is a namespace's key registry: key bytes → entry, a small
 * integer that numbers the key's state in the namespace's columns
 * (KeyColumns, Rank.pageOf), without a
 * JavaScript string per lookup. A `Map<string, …>` needs a string made from
 * the request's bytes for every key of every call, and its lookup follows
 * three pointers; here a lookup hashes the bytes where they lie, reads one
 * bucket (fingerprint and entry side by side) and compares bytes in an arena.
 *
 * Layout: `buckets` is an open-addressing table with linear probing, two
 * int32 per bucket: the key's hash and entry + 1 (0 for an empty bucket).
 * An entry e holds its key's bytes at arena[spans[2e] .. + spans[2e + 1]]
 * (offset and length side by side: a lookup's one cache line) and its hash
 * at hashes[e]; a free entry has length -1 and is reused. Deleting shifts
 * the run after the bucket back, so there are no tombstones. The arena only
 * appends; it is compacted when more than half of it is dead. Keys of a
 * hash that already fills SAME_HASH_LIMIT buckets go to `overflow` instead.
 *
 * Invariants: every live entry is either in exactly one bucket, reachable
 * from its home bucket (hash & mask) without crossing an empty one, or in
 * `overflow` (and counted in overflowHashes under its hash); at most
 * SAME_HASH_LIMIT buckets hold one hash; buckets are at most half full.
 */
export class KeyTable {
  private buckets = new Int32Array(MIN_BUCKETS * 2);
  private mask = MIN_BUCKETS - 1;
  /** spans holds each entry's key as (offset in the arena, length). */
  private spans = new Int32Array(MIN_BUCKETS);
  private hashes = new Int32Array(MIN_BUCKETS / 2);
  /** entries is the high-water mark: every entry in use is below it. */
  private entries = 0;
  private readonly freeEntries: number[] = [];
  private arena = Buffer.allocUnsafe(MIN_ARENA);
  /** arenaView is a DataView of the arena: keys are compared and copied four bytes per step. */
  private arenaView = viewOf(this.arena);
  private arenaUsed = 0;
  private arenaLive = 0;
  private count = 0;
  /** overflow holds the keys past SAME_HASH_LIMIT, by their bytes as a latin1 string (one char per byte, so exact), to their entries. */
  private readonly overflow = new Map<string, number>();
  /** overflowed maps each entry in `overflow` to its key there. */
  private readonly overflowed = new Map<number, string>();
  /** overflowHashes counts the keys in `overflow` by hash: only these hashes are looked up there. */
  private readonly overflowHashes = new Map<number, number>();

  get size(): number {
    return this.count;
  }

  /** find returns the entry of the key at bytes[start .. end), whose hashKey is hash; -1 when it is not registered. */
  find(bytes: Buffer, start: number, end: number, hash: number, view = viewOf(bytes)): number {
    const buckets = this.buckets;
    const wrap = this.mask * 2 + 1;
    const length = end - start;
    for (let bucket = (hash & this.mask) * 2; ; bucket = (bucket + 2) & wrap) {
      const entry = buckets[bucket + 1]! - 1;
      if (entry < 0) return this.overflowHashes.size > 0 ? this.findOverflow(bytes, start, end, hash) : -1;
      if (buckets[bucket] !== hash || this.spans[entry * 2 + 1] !== length) continue;
      if (this.sameBytes(this.spans[entry * 2]!, view, start, length)) return entry;
    }
  }

  /** findOverflow looks a key up in `overflow`, if keys of its hash went there. */
  private findOverflow(bytes: Buffer, start: number, end: number, hash: number): number {
    if (!this.overflowHashes.has(hash)) return -1;
    return this.overflow.get(bytes.toString("latin1", start, end)) ?? -1;
  }

  /**
   * findAll is find for many keys: key i at bytes[starts[i] .. ends[i]), whose
   * hashKey is hashes[i], its entry (or -1) into found[i]. It
   * reads every key's bucket first and compares bytes after, so that the
   * cache misses of different keys overlap instead of following one another.
   */
  findAll(bytes: Buffer, starts: readonly number[], ends: readonly number[], hashes: Int32Array, found: Int32Array, view = viewOf(bytes)): void {
    const buckets = this.buckets;
    const spans = this.spans;
    const wrap = this.mask * 2 + 1;
    // found[i] holds key i's candidate bucket between the two passes.
    for (let i = 0; i < hashes.length; i++) {
      const hash = hashes[i]!;
      let bucket = (hash & this.mask) * 2;
      while (buckets[bucket + 1] !== 0 && buckets[bucket] !== hash) bucket = (bucket + 2) & wrap;
      found[i] = bucket;
    }
    for (let i = 0; i < hashes.length; i++) {
      const bucket = found[i]!;
      const entry = buckets[bucket + 1]! - 1;
      if (entry < 0) {
        found[i] = this.overflowHashes.size > 0 ? this.findOverflow(bytes, starts[i]!, ends[i]!, hashes[i]!) : -1;
        continue;
      }
      const length = ends[i]! - starts[i]!;
      const same = spans[entry * 2 + 1] === length && this.sameBytes(spans[entry * 2]!, view, starts[i]!, length);
      found[i] = same ? entry : this.find(bytes, starts[i]!, ends[i]!, hashes[i]!, view);
    }
  }

  /** insert registers the key at bytes[start .. end), which is not in the table; returns its entry. */
  insert(bytes: Buffer, start: number, end: number, hash: number, view = viewOf(bytes)): number {
    if ((this.count + 1) * 2 > this.buckets.length / 2) this.resize(this.buckets.length);
    const length = end - start;
    if (this.arenaUsed + length > this.arena.length) this.makeRoom(length);
    const entry = this.freeEntries.length > 0 ? this.freeEntries.pop()! : this.entries++;
    if (entry >= this.hashes.length) this.growEntries();
    // A loop, not Buffer.copy: its argument checks cost more than copying a key of tens of bytes.
    copyBytes(view, start, this.arenaView, this.arenaUsed, length);
    this.spans[entry * 2] = this.arenaUsed;
    this.spans[entry * 2 + 1] = length;
    this.hashes[entry] = hash;
    this.arenaUsed += length;
    this.arenaLive += length;
    this.count++;
    let bucket = (hash & this.mask) * 2;
    let sameHash = 0;
    for (; this.buckets[bucket + 1] !== 0; bucket = (bucket + 2) & (this.mask * 2 + 1)) if (this.buckets[bucket] === hash) sameHash++;
    if (sameHash >= SAME_HASH_LIMIT) {
      this.addOverflow(entry, bytes.toString("latin1", start, end), hash);
      return entry;
    }
    this.buckets[bucket] = hash;
    this.buckets[bucket + 1] = entry + 1;
    return entry;
  }

  /** delete removes the entry `entry`. */
  delete(entry: number): void {
    if (this.overflowed.size > 0 && this.overflowed.has(entry)) this.deleteOverflow(entry);
    else {
      let bucket = (this.hashes[entry]! & this.mask) * 2;
      while (this.buckets[bucket + 1] !== entry + 1) bucket = (bucket + 2) & (this.mask * 2 + 1);
      this.removeBucket(bucket);
    }
    this.arenaLive -= this.spans[entry * 2 + 1]!;
    this.spans[entry * 2 + 1] = -1;
    this.freeEntries.push(entry);
    this.count--;
  }

  private addOverflow(entry: number, key: string, hash: number): void {
    this.overflow.set(key, entry);
    this.overflowed.set(entry, key);
    this.overflowHashes.set(hash, (this.overflowHashes.get(hash) ?? 0) + 1);
  }

  private deleteOverflow(entry: number): void {
    const key = this.overflowed.get(entry)!;
    this.overflow.delete(key);
    this.overflowed.delete(entry);
    const hash = this.hashes[entry]!;
    const left = this.overflowHashes.get(hash)! - 1;
    if (left > 0) this.overflowHashes.set(hash, left);
    else this.overflowHashes.delete(hash);
  }

  /** overflowSize is the number of keys kept past SAME_HASH_LIMIT (inspection and tests). */
  get overflowSize(): number {
    return this.overflow.size;
  }

  /** inBuckets counts the keys with full hash `hash` that the buckets hold: at most SAME_HASH_LIMIT (inspection and tests). */
  inBuckets(hash: number): number {
    let count = 0;
    for (let bucket = (hash & this.mask) * 2; this.buckets[bucket + 1] !== 0; bucket = (bucket + 2) & (this.mask * 2 + 1))
      if (this.buckets[bucket] === hash) count++;
    return count;
  }

  /** keyOf is the key of entry `entry` as a string. */
  keyOf(entry: number): string {
    const offset = this.spans[entry * 2]!;
    return this.arena.toString("utf8", offset, offset + this.spans[entry * 2 + 1]!);
  }

  /** live lists the entries in use, in no particular order; the loop may delete the entry it is at. */
  *live(): IterableIterator<number> {
    for (let entry = 0; entry < this.entries; entry++) if (this.spans[entry * 2 + 1]! >= 0) yield entry;
  }

  /** sameBytes compares the arena's bytes at offset with the view's at start. */
  private sameBytes(offset: number, view: DataView, start: number, length: number): boolean {
    return sameBytes(this.arenaView, offset, view, start, length);
  }

  /** removeBucket empties a bucket and shifts back the entries after it that would no longer be reachable. */
  private removeBucket(hole: number): void {
    const buckets = this.buckets;
    const wrap = this.mask * 2 + 1;
    for (let bucket = (hole + 2) & wrap; buckets[bucket + 1] !== 0; bucket = (bucket + 2) & wrap) {
      const home = (buckets[bucket]! & this.mask) * 2;
      // The entry at bucket may move to the hole unless its home lies after the hole, cyclically, up to bucket.
      if (((bucket - home) & wrap) >= ((bucket - hole) & wrap)) {
        buckets[hole] = buckets[bucket]!;
        buckets[hole + 1] = buckets[bucket + 1]!;
        hole = bucket;
      }
    }
    buckets[hole] = 0;
    buckets[hole + 1] = 0;
  }

  /** resize rebuilds the buckets at twice `size` int32s, from the stored hashes (no key is hashed again). */
  private resize(size: number): void {
    const old = this.buckets;
    this.buckets = new Int32Array(size * 2);
    this.mask = size - 1;
    const wrap = this.mask * 2 + 1;
    for (let i = 0; i < old.length; i += 2) {
      if (old[i + 1] === 0) continue;
      let bucket = (old[i]! & this.mask) * 2;
      while (this.buckets[bucket + 1] !== 0) bucket = (bucket + 2) & wrap;
      this.buckets[bucket] = old[i]!;
      this.buckets[bucket + 1] = old[i + 1]!;
    }
  }

  private growEntries(): void {
    const capacity = grownCapacity(this.hashes.length, this.entries + 1, MIN_BUCKETS / 2);
    this.spans = grown(this.spans, capacity * 2);
    this.hashes = grown(this.hashes, capacity);
  }

  /** makeRoom compacts the arena when at least half of it is dead, else grows it by half (one copy, offsets unchanged). */
  private makeRoom(length: number): void {
    if (this.arenaLive * 2 > this.arena.length || this.arenaLive + length > this.arena.length / 2) {
      const size = grownCapacity(this.arena.length, this.arenaUsed + length, MIN_ARENA);
      const arena = Buffer.allocUnsafe(size);
      this.arena.copy(arena, 0, 0, this.arenaUsed);
      this.arena = arena;
      this.arenaView = viewOf(arena);
      return;
    }
    // Moved by a loop, not a Buffer.copy per key: a call per live key made compaction cost calls, not
    // bytes (bench/README, "The key columns").
    const from = this.arenaView;
    const arena = Buffer.allocUnsafe(this.arena.length);
    const to = viewOf(arena);
    let used = 0;
    for (let entry = 0; entry < this.entries; entry++) {
      const entryLength = this.spans[entry * 2 + 1]!;
      if (entryLength < 0) continue;
      copyBytes(from, this.spans[entry * 2]!, to, used, entryLength);
      this.spans[entry * 2] = used;
      used += entryLength;
    }
    this.arena = arena;
    this.arenaView = to;
    this.arenaUsed = used;
  }
}

/** sameBytes tells whether `length` bytes of `a` at aStart equal those of `b` at bStart, four bytes per step. */
export function sameBytes(a: DataView, aStart: number, b: DataView, bStart: number, length: number): boolean {
  // A loop, not Buffer.compare: its argument checks cost more than comparing a key of tens of bytes.
  // The last word first: keys that differ mostly differ there or at the start (counters, paths, hashes).
  if (length >= 4 && a.getInt32(aStart + length - 4) !== b.getInt32(bStart + length - 4)) return false;
  let i = 0;
  for (; i + 4 <= length; i += 4) if (a.getInt32(aStart + i) !== b.getInt32(bStart + i)) return false;
  for (; i < length; i++) if (a.getUint8(aStart + i) !== b.getUint8(bStart + i)) return false;
  return true;
}

/** copyBytes copies `length` bytes from `from` at fromOffset to `to` at toOffset, four bytes per step. */
function copyBytes(from: DataView, fromOffset: number, to: DataView, toOffset: number, length: number): void {
  let i = 0;
  for (; i + 4 <= length; i += 4) to.setInt32(toOffset + i, from.getInt32(fromOffset + i));
  for (; i < length; i++) to.setUint8(toOffset + i, from.getUint8(fromOffset + i));
}
