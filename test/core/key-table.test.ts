import fc from "fast-check";
import murmurhash from "murmurhash";
import { describe, expect, it } from "vitest";
import { keyListOf } from "../../src/core/key-list.js";
import { hashKey, KeyTable } from "../../src/core/key-table.js";

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

describe("KeyTable", () => {
  it("finds what a Map finds, one key or many at once, through inserts and deletes, with colliding hashes, growth and arena compaction", () => {
    const key = fc.oneof(
      fc.string({ maxLength: 6 }),
      fc.string({ unit: "grapheme", maxLength: 3 }),
      fc.nat(300).map((n) => `key-${n}`),
    );
    fc.assert(
      fc.property(fc.array(fc.record({ insert: fc.boolean(), key }), { maxLength: 400 }), fc.constantFrom(1, 3, 8, 32), (ops, bits) => run(ops, bits)),
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
