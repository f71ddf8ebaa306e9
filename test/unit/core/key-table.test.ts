import fc from "fast-check";
import murmurhash from "murmurhash";
import { describe, expect, it } from "vitest";
import { assertInvariants } from "../../../bench/harness/invariants.js";
import { murmurCollisions } from "../../../bench/harness/murmur-collisions.js";
import { seededRandom } from "../../../bench/harness/random.js";
import { keyListOf } from "../../../src/core/key-list.js";
import { hashKey, KeyTable, PrefixedHash, SAME_HASH_LIMIT } from "../../../src/core/key-table.js";
import { MetadataState, namespacesOf } from "../../../src/core/state.js";

/** A model run: the table against a Map, with the hash narrowed to `bits` so that keys collide, runs wrap and shifts happen. */
function run(ops: { insert: boolean; key: string }[], bits: number): void {
  const table = new KeyTable();
  const model = new Map<string, number>();
  const keyOfEntry = new Map<number, string>();
  const hashOf = (bytes: Uint8Array, start: number, end: number) => (bits === 32 ? hashKey(bytes, start, end) : hashKey(bytes, start, end) & ((1 << bits) - 1));
  for (const { insert, key } of ops) {
    const keys = keyListOf([key]);
    const [start, end] = [keys.starts[0]!, keys.ends[0]!];
    const hash = hashOf(keys.bytes, start, end);
    const found = table.find(keys.bytes, start, end, hash);
    expect(found).toBe(model.get(key) ?? -1);
    if (insert && found < 0) {
      const entry = table.insert(keys.bytes, start, end, hash);
      // A new key takes an entry no live key has.
      expect(keyOfEntry.get(entry)).toBeUndefined();
      model.set(key, entry);
      keyOfEntry.set(entry, key);
    } else if (!insert && found >= 0) {
      table.delete(found);
      model.delete(key);
      keyOfEntry.delete(found);
    }
    expect(table.size).toBe(model.size);
  }
  for (const [key, entry] of model) {
    const keys = keyListOf([key]);
    expect(table.find(keys.bytes, keys.starts[0]!, keys.ends[0]!, hashOf(keys.bytes, keys.starts[0]!, keys.ends[0]!))).toBe(entry);
  }
  expect(new Set(table.live())).toEqual(new Set(model.values()));
  // findAll agrees with the model for every key seen, present or not, in one call.
  const seen = [...new Set(ops.map((op) => op.key))];
  const all = keyListOf(seen);
  const hashes = Int32Array.from(seen, (_, i) => hashOf(all.bytes, all.starts[i]!, all.ends[i]!));
  const found = new Int32Array(seen.length);
  table.findAll(all.bytes, all.starts, all.ends, hashes, found);
  expect([...found]).toEqual(seen.map((key) => model.get(key) ?? -1));
  for (const [key, entry] of model) expect(table.keyOf(entry)).toBe(key);
  // However the hashes collide, the buckets hold at most SAME_HASH_LIMIT keys of one hash.
  for (const hash of new Set(hashes)) expect(table.inBuckets(hash)).toBeLessThanOrEqual(SAME_HASH_LIMIT);
}

describe("hashKey", () => {
  it("is MurmurHash3 x86_32 of the byte range with the seed, as the murmurhash package computes it", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 80 }), fc.nat(8), fc.nat(8), fc.nat({ max: 0xffff_ffff }), fc.nat(7), (bytes, cutStart, cutEnd, seed, shift) => {
        const start = Math.min(cutStart, bytes.length);
        const end = Math.max(start, bytes.length - cutEnd);
        expect(hashKey(bytes, start, end, seed) >>> 0).toBe(murmurhash.v3(bytes.subarray(start, end), seed));
        // The same bytes inside a larger buffer, as a request's are: the 4-byte loads see the view, at any alignment.
        const host = new Uint8Array(shift + bytes.length);
        host.set(bytes, shift);
        expect(hashKey(host.subarray(shift), start, end, seed)).toBe(hashKey(bytes, start, end, seed));
      }),
      { numRuns: 2_000 },
    );
  });
});

describe("PrefixedHash", () => {
  it("is MurmurHash3 (seed 0) of the prefix and the key together, at every length of either", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 11 }), fc.uint8Array({ maxLength: 13 }), fc.nat(7), (prefix, key, shift) => {
        const host = new Uint8Array(shift + key.length);
        host.set(key, shift);
        const hash = new PrefixedHash(prefix);
        const view = new DataView(host.buffer);
        expect(hash.of(host, shift, shift + key.length, view) >>> 0).toBe(murmurhash.v3(Buffer.concat([prefix, key]), 0));
      }),
      { numRuns: 2_000 },
    );
  });
});

describe("KeyTable", () => {
  it("finds what a Map finds, one key or many at once, through inserts and deletes, with colliding hashes, growth and arena compaction", () => {
    const key = fc.oneof(
      fc.string({ maxLength: 6 }),
      fc.string({ unit: "grapheme", maxLength: 3 }),
      fc.nat(300).map((n) => `key-${n}`),
    );
    fc.assert(
      fc.property(fc.array(fc.record({ insert: fc.boolean(), key }), { maxLength: 400, size: "max" }), fc.constantFrom(1, 3, 8, 32), (ops, bits) =>
        run(ops, bits),
      ),
      { numRuns: 300 },
    );
  });

  it("keeps 20,000 keys through rounds of deleting and inserting half of them, compacting its arena", () => {
    const ops: { insert: boolean; key: string }[] = [];
    for (let i = 0; i < 20_000; i++) ops.push({ insert: true, key: `k${i}`.padEnd(64, "x") });
    for (let round = 0; round < 3; round++) {
      for (let i = round % 2; i < 50_000; i += 2) ops.push({ insert: false, key: `k${i}`.padEnd(64, "x") });
      for (let i = round % 2; i < 50_000; i += 2) ops.push({ insert: true, key: `k${i}`.padEnd(64, "x") });
    }
    run(ops, 32);
  });

  it("compares bytes, not strings: a key with U+FEFF first and one decoded from the same bytes are one key", () => {
    const table = new KeyTable();
    const keys = keyListOf(["\uFEFFk", "k"]);
    const entry = table.insert(keys.bytes, keys.starts[0]!, keys.ends[0]!, keys.hash(0));
    expect(table.find(keys.bytes, keys.starts[0]!, keys.ends[0]!, keys.hash(0))).toBe(entry);
    expect(table.find(keys.bytes, keys.starts[1]!, keys.ends[1]!, keys.hash(1))).toBe(-1);
  });
});

describe("keys that collide under every seed", () => {
  /** A seeded generator, so that the keys are the same every run. */
  const random = seededRandom(0x2545f491);
  const keys = murmurCollisions(10, random);

  it("are real: 1,024 distinct UTF-8 keys, one MurmurHash3 under any seed", () => {
    const list = keyListOf(keys);
    expect(new Set(keys).size).toBe(1_024);
    for (const seed of [0, 1, 0xdeadbeef]) {
      expect(new Set(keys.map((_, i) => hashKey(list.bytes, list.starts[i]!, list.ends[i]!, seed))).size).toBe(1);
    }
  });

  it("fill at most SAME_HASH_LIMIT buckets; the rest are found, listed, named and deleted all the same", () => {
    const table = new KeyTable();
    const list = keyListOf(keys);
    const entries = keys.map((_, i) => table.insert(list.bytes, list.starts[i]!, list.ends[i]!, list.hash(i), list.view));
    expect(table.inBuckets(list.hash(0))).toBe(SAME_HASH_LIMIT);
    expect(table.overflowSize).toBe(keys.length - SAME_HASH_LIMIT);
    const found = new Int32Array(keys.length);
    table.findAll(list.bytes, list.starts, list.ends, list.hashes(), found, list.view);
    expect([...found]).toEqual(entries);
    expect(new Set(table.live())).toEqual(new Set(entries));
    for (let i = 0; i < keys.length; i++) expect(table.keyOf(entries[i]!)).toBe(keys[i]);
    // Deleting the keys in the buckets leaves the others found; new keys of the hash take the freed buckets.
    for (let i = 0; i < keys.length; i += 2) table.delete(entries[i]!);
    for (let i = 0; i < keys.length; i++) {
      expect(table.find(list.bytes, list.starts[i]!, list.ends[i]!, list.hash(i), list.view)).toBe(i % 2 === 0 ? -1 : entries[i]);
    }
    for (let i = 0; i < keys.length; i += 2) entries[i] = table.insert(list.bytes, list.starts[i]!, list.ends[i]!, list.hash(i), list.view);
    expect(table.inBuckets(list.hash(0))).toBe(SAME_HASH_LIMIT);
    table.findAll(list.bytes, list.starts, list.ends, list.hashes(), found, list.view);
    expect([...found]).toEqual(entries);
    expect(table.size).toBe(keys.length);
  });

  it("go through the whole cycle, with eviction, and leave every invariant holding", () => {
    const state = new MetadataState(() => 0, { readLeaseTtlMs: 0 }, true);
    state.initializeRank("", 0, 600, 1);
    for (let i = 0; i < keys.length; i += 256) {
      const batch = keys.slice(i, i + 256);
      const { pages } = state.batchAllocate("", 0, batch);
      state.confirmWrite("", 0, batch, pages);
      expect(state.batchExists("", batch)).toEqual(batch.map(() => true));
      expect(state.getLocations("", 0, batch)).toEqual(pages);
      assertInvariants(state);
    }
    // 600 pages for 1,024 keys: the oldest were evicted, and the registry holds exactly the rest.
    expect(state.batchExists("", keys).filter(Boolean)).toHaveLength(600);
    expect(state.deleteKeys("", keys)).toBe(600);
    expect(namespacesOf(state).get("kv")!.keys.size).toBe(0);
    assertInvariants(state);
  });
});

describe("keyListOf", () => {
  it("gives each key the bytes Buffer.from gives it, in one encoding for keys of ASCII and key by key for the others", () => {
    const key = fc.oneof(
      { weight: 3, arbitrary: fc.string({ unit: fc.constantFrom(..."0123456789abcdef"), maxLength: 64 }) },
      fc.string({ unit: "grapheme", maxLength: 8 }),
      fc.string({ unit: "binary", maxLength: 4 }), // lone surrogates: U+FFFD, as Buffer.from writes them
    );
    fc.assert(
      fc.property(fc.array(key, { maxLength: 40 }), (keys) => {
        const list = keyListOf(keys);
        expect(list.length).toBe(keys.length);
        for (let i = 0; i < keys.length; i++) {
          expect(list.bytes.subarray(list.starts[i], list.ends[i])).toEqual(Buffer.from(keys[i]!, "utf8"));
          expect(list.hash(i)).toBe(keyListOf([keys[i]!]).hash(0));
        }
      }),
      { numRuns: 500 },
    );
    // Past 2^24 characters in all, key by key: the same bytes.
    const long = keyListOf(["a".repeat(1 << 23), "b".repeat((1 << 23) + 1)]);
    expect([long.byteLength(0), long.byteLength(1), long.bytes[(1 << 23) - 1], long.bytes[1 << 23]]).toEqual([1 << 23, (1 << 23) + 1, 0x61, 0x62]);
  });
});
