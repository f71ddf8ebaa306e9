import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { Change } from "../../../src/core/change.js";
import { decodeGroup, decodePart, encodeGroup, GroupAssembler, PART_BYTES, splitGroup } from "../../../src/replication/log-codec.js";

const name = fc.string({ minLength: 1, maxLength: 40, unit: "grapheme" });
const uint = fc.nat({ max: 2 ** 31 - 1 });
const parent = fc.oneof(fc.constant(""), fc.constant(null), name);
const change: fc.Arbitrary<Change> = fc.oneof(
  fc.record({ kind: fc.constant("rank" as const), namespace: name, rank: uint, numPages: uint, worldSize: uint }),
  fc.record({ kind: fc.constant("reserve" as const), namespace: name, rank: uint, page: uint, key: name, parent, expiresAtMs: fc.nat() }),
  fc.record({ kind: fc.constant("unreserve" as const), namespace: name, rank: uint, page: uint }),
  fc.record({ kind: fc.constant("unreserve" as const), namespace: name, rank: uint, page: uint, confirmed: fc.constant(true as const) }),
  fc.record({ kind: fc.constant("key" as const), namespace: name, key: name, parent, complete: fc.boolean(), pages: fc.array(uint, { maxLength: 8 }) }),
  fc.record({ kind: fc.constant("forget" as const), namespace: name, key: name }),
  fc.record({ kind: fc.constant("drain" as const), namespace: name, rank: uint, page: uint, key: name, untilMs: fc.nat() }),
  fc.record({ kind: fc.constant("undrain" as const), namespace: name, rank: uint, page: uint }),
  fc.record({ kind: fc.constant("unrank" as const), namespace: name, rank: uint }),
);

describe("the replicated log's records", () => {
  it("decode to the changes they encode, in order", () => {
    fc.assert(
      fc.property(fc.array(change, { maxLength: 50 }), (changes) => {
        expect(decodeGroup(encodeGroup(changes))).toEqual(changes);
      }),
    );
  });

  it("cut a large group into parts below PART_BYTES that join again", () => {
    const changes: Change[] = Array.from({ length: 20_000 }, (_, i) => ({ kind: "forget", namespace: "kv", key: `${"k".repeat(100)}-${i}` }));
    const parts = splitGroup(encodeGroup(changes), 41);
    expect(parts.length).toBeGreaterThan(1);
    for (const part of parts) expect(part.length).toBeLessThanOrEqual(PART_BYTES + 7);
    const groups = new GroupAssembler();
    const results = parts.map((part, i) => groups.add(41 + i, decodePart(part)));
    expect(results.slice(0, -1).every((r) => r === undefined)).toBe(true);
    expect(results.at(-1)).toEqual(changes);
  });

  it("drop a group whose last parts never came: the next group starts over", () => {
    const big = encodeGroup(Array.from({ length: 20_000 }, (_, i) => ({ kind: "forget" as const, namespace: "kv", key: `${"x".repeat(100)}-${i}` })));
    const [first, second] = splitGroup(big, 10);
    const next: Change[] = [{ kind: "unreserve", namespace: "kv", rank: 0, page: 3 }];
    const groups = new GroupAssembler();
    expect(groups.add(10, decodePart(first!))).toBeUndefined();
    // The leader died after the first part; the next leader's group starts at 11.
    expect(groups.add(11, decodePart(splitGroup(encodeGroup(next), 11)[0]!))).toEqual(next);
    // A straggling part of the dropped group (first 10) is ignored.
    expect(groups.add(12, decodePart(second!))).toBeUndefined();
  });
});
