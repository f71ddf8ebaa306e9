import { readFileSync } from "node:fs";
import fc from "fast-check";
import murmurhash from "murmurhash";
import { describe, expect, it } from "vitest";
import { AllocationStatus, Reason } from "../../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { KeyList, keyListOf } from "../../../src/core/key-list.js";
import { chainPrefixes, firstOwnedFrom, keyShard, keyShards, ownedPages, type ShardPart } from "../../../src/core/shards.js";
import { MetadataState } from "../../../src/core/state.js";
import { FakeClock } from "../../support/fake-clock.js";

/** VECTORS are keyShard's test vectors in docs/contract.md ("Shards"): namespace, key, MurmurHash3, and the shard of 2, 3, 4 and 8. */
const VECTORS: [string, string, number, number[]][] = [
  ["kv", "0", 3897214315, [1, 1, 3, 3]],
  ["kv", "block-0001", 117328691, [1, 2, 3, 3]],
  ["llama-70b", "a3f9c2e1", 3117917185, [1, 1, 1, 1]],
  ["модель", "ключ", 1092155921, [1, 2, 1, 1]],
];

describe("keyShard, the shard of a key", () => {
  it("has its test vectors in docs/contract.md as the code has them", () => {
    const page = readFileSync(new URL("../../../docs/contract.md", import.meta.url), "utf8");
    const rows = [...page.matchAll(/^\| `([^`]+)` \| `([^`]+)` \| (\d+) \| ([\d, ]+) \|$/gm)];
    expect(rows.map((r) => [r[1], r[2], Number(r[3]), r[4]!.split(", ").map(Number)])).toEqual(VECTORS);
  });

  it("gives docs/contract.md's test vectors, and names the empty namespace kv", () => {
    for (const [namespace, key, , shards] of VECTORS) expect([2, 3, 4, 8].map((count) => keyShard(namespace, key, count))).toEqual(shards);
    expect(keyShard("", "block-0001", 3)).toBe(keyShard("kv", "block-0001", 3));
    expect(keyShard("kv", "anything", 1)).toBe(0);
  });

  it("is MurmurHash3 (x86, 32 bits, seed 0) of namespace, 0x1F, key, as the murmurhash package computes it", () => {
    const reference = (namespace: string, key: string, count: number) =>
      murmurhash.v3(new Uint8Array(Buffer.concat([Buffer.from(namespace), Buffer.from([0x1f]), Buffer.from(key)])), 0) % count;
    for (const [namespace, key, hash] of VECTORS) expect(murmurhash.v3(new Uint8Array(Buffer.from(`${namespace}\u001f${key}`)), 0)).toBe(hash);
    fc.assert(
      fc.property(
        fc.string({ minLength: 1, unit: "grapheme" }),
        fc.string({ maxLength: 5_000, unit: "grapheme" }),
        fc.integer({ min: 1, max: 64 }),
        (ns, key, count) => {
          expect(keyShard(ns, key, count)).toBe(reference(ns, key, count));
        },
      ),
    );
  });
});

describe("keyShards, the shards of a call's keys", () => {
  it("are keyShard of each key, whether the keys come as strings or as a request's bytes", () => {
    fc.assert(
      fc.property(
        fc.string({ unit: "grapheme" }),
        fc.array(fc.string({ maxLength: 3_000, unit: "grapheme" }), { maxLength: 20 }),
        fc.integer({ min: 1, max: 64 }),
        (ns, keys, count) => {
          const expected = keys.map((key) => keyShard(ns, key, count));
          expect(keyShards(ns, keys, count)).toEqual(expected);
          // Bytes after others in one buffer, as a decoded request holds them.
          const list = keyListOf(["x", ...keys]);
          const bytes = new KeyList(list.bytes, list.starts.slice(1), list.ends.slice(1));
          expect(keyShards(ns, bytes, count)).toEqual(expected);
        },
      ),
    );
  });
});

describe("chainPrefixes, the prefix keys a call's parts are sent", () => {
  /** sent is each key's prefix key as chainPrefixes chooses it, by name. */
  const sent = (keys: string[], prefixes: string[], shards: number[]) => {
    const [k, p] = [keyListOf(keys), keyListOf(prefixes)];
    return [...chainPrefixes(k, p, shards)].map((c) => (c >= 0 ? keys[c]! : prefixes[-1 - c]!));
  };

  it("gives a key the nearest earlier key of its chain on its own shard, or the prefix the chain started from", () => {
    const keys = ["a", "b", "c", "d", "e", "f"];
    // A chain from x (another call's key): a, b on shard 0, c on 1, d on 0, e, f on 1.
    expect(sent(keys, ["x", "a", "b", "c", "d", "e"], [0, 0, 1, 0, 1, 1])).toEqual(["x", "a", "x", "b", "c", "e"]);
    // From a root: the first key of a shard's part of the chain is a root there.
    expect(sent(keys, ["", "a", "b", "c", "d", "e"], [1, 0, 0, 1, 0, 1])).toEqual(["", "", "b", "a", "c", "d"]);
    // Two chains in one call (e starts anew from y): e's shard's nearest is not taken across them.
    expect(sent(keys, ["", "a", "b", "c", "y", "e"], [0, 1, 0, 1, 0, 1])).toEqual(["", "", "a", "b", "y", "y"]);
    // A key that names another prefix key than the key before it keeps it, and starts a chain.
    expect(sent(["a", "b", "c"], ["", "z", "b"], [0, 1, 0])).toEqual(["", "z", "z"]);
    // A key repeated in its chain keeps its own prefix: a key is never sent as its own.
    expect(sent(["a", "b", "a"], ["", "a", "b"], [0, 1, 0])).toEqual(["", "", "b"]);
  });
});

describe("a state of one shard (ShardPart)", () => {
  it("owns pages p with p mod count = index: ownedPages and firstOwnedFrom agree with counting them", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 9 }), fc.nat(60), fc.nat(60), (count, index, numPages) => {
        const part = { count, index: index % count };
        const owned = Array.from({ length: numPages }, (_, p) => p).filter((p) => p % count === part.index);
        expect(ownedPages(numPages, part)).toBe(owned.length);
        for (let p = 0; p < numPages; p++) expect(firstOwnedFrom(p, part)).toBe(owned.find((q) => q >= p) ?? firstOwnedFrom(p, part));
        expect(firstOwnedFrom(numPages, part) % count).toBe(part.index);
      }),
    );
  });

  it("refuses to write keys another shard owns, naming the key and its shard, and changes nothing", () => {
    const part: ShardPart = { count: 2, index: 1 };
    const state = new MetadataState(new FakeClock().clock, { shards: 2, shard: 1 }, true);
    state.initializeRank("kv", 0, 8, 1);
    const [mine, theirs] = [ownKeys(part, 1)[0]!, ownKeys({ count: 2, index: 0 }, 1)[0]!];
    const refused = { reason: Reason.INVALID_ARGUMENT, subject: expect.objectContaining({ field: "keys", key: theirs }) };
    expect(() => state.batchAllocate("kv", 0, [mine, theirs])).toThrow(expect.objectContaining(refused));
    expect(() => state.batchAllocate("kv", 0, [mine, theirs])).toThrow(`key "${theirs}" belongs to shard 0 of 2, not to this one (1)`);
    expect(() => state.confirmWrite("kv", 0, [theirs], [1])).toThrow(expect.objectContaining(refused));
    expect(state.stats("kv")[0]).toMatchObject({ keys: 0, ranks: [{ freePages: 4, reservedPages: 0 }] });
    // A single node owns every key.
    const single = new MetadataState(new FakeClock().clock, {}, true);
    single.initializeRank("kv", 0, 8, 1);
    expect(single.batchAllocate("kv", 0, [mine, theirs]).statuses).toEqual([AllocationStatus.NEW, AllocationStatus.NEW]);
  });

  it("counts a key whose prefix key another shard owns as a root, one whose own shard's prefix key is unknown as an orphan", () => {
    const time = new FakeClock();
    const state = new MetadataState(time.clock, { shards: 2, shard: 1, evictHighWatermark: 1, evictLowWatermark: 1 }, true);
    state.initializeRank("kv", 0, 4, 1); // 2 pages of shard 1's
    const [rooted, orphaned, next] = ownKeys({ count: 2, index: 1 }, 3);
    const [theirs, mineUnknown] = [ownKeys({ count: 2, index: 0 }, 1)[0]!, ownKeys({ count: 2, index: 1 }, 4)[3]!];
    for (const [key, prefix] of [
      [rooted!, theirs],
      [orphaned!, mineUnknown],
    ] as const) {
      const { pages } = state.batchAllocate("kv", 0, [key], [prefix]);
      state.confirmWrite("kv", 0, [key], pages);
      time.advance(10);
    }
    // Full: the orphan goes first, though the root is older.
    state.batchAllocate("kv", 0, [next!]);
    expect(state.batchExists("kv", [rooted!, orphaned!])).toEqual([true, false]);
    expect(state.stats("kv")[0]).toMatchObject({ orphanEvictions: 1, leafEvictions: 0 });
  });

  it("hands out its own pages only: the shards of a rank together hand out each page once, and count them as theirs", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 5 }), fc.integer({ min: 1, max: 40 }), fc.integer({ min: 0, max: 20 }), (count, numPages, grow) => {
        const pages: number[] = [];
        for (let index = 0; index < count; index++) {
          const part: ShardPart = { count, index };
          const state = new MetadataState(new FakeClock().clock, { shards: part.count, shard: part.index }, true);
          state.initializeRank("kv", 0, numPages, 1);
          expect(state.stats("kv")[0]!.ranks[0]!.freePages).toBe(ownedPages(numPages, part));
          const mine = (n: number, from: number) => state.batchAllocate("kv", 0, ownKeys(part, from + n).slice(from));
          const first = mine(numPages, 0);
          // A rank grown later hands out the new pages of this shard too.
          state.initializeRank("kv", 0, numPages + grow, 1);
          const second = mine(grow, numPages);
          const taken = [...first.pages, ...second.pages].filter((p) => p >= 0);
          expect(taken.length).toBe(ownedPages(numPages + grow, part));
          expect(taken.every((p) => p % count === index)).toBe(true);
          expect(first.statuses.filter((s) => s === AllocationStatus.NO_SPACE).length).toBe(numPages - ownedPages(numPages, part));
          expect(state.stats("kv")[0]!.ranks[0]!.freePages).toBe(0);
          pages.push(...taken);
        }
        expect(pages.sort((a, b) => a - b)).toEqual(Array.from({ length: numPages + grow }, (_, p) => p));
      }),
    );
  });
});

/** ownKeys are the first n keys ("k0", "k1", ...) that shard `part` of namespace kv owns. */
function ownKeys(part: ShardPart, n: number): string[] {
  const keys: string[] = [];
  for (let i = 0; keys.length < n; i++) if (keyShard("kv", `k${i}`, part.count) === part.index) keys.push(`k${i}`);
  return keys;
}
