import { Packr } from "msgpackr";
import { describe, expect, it } from "vitest";
import type { Change } from "../../../src/core/change.js";
import { CHANGE_FORMATS } from "../../../src/core/change-formats.js";
import { decodeGroup, encodeGroup } from "../../../src/replication/log-codec.js";
import { storedChange, writeOf } from "../../../src/store/schema.js";

// The log's tuples and the store's records are formats that outlive a release: a server reads what an older one wrote,
// and a standby what an older leader appends. These pin both, byte for value, for one change of every kind.
const N = "n".repeat(600);
const K = "k".repeat(600);
const SAMPLE: Change[] = [
  { kind: "rank", namespace: "kv", rank: 1, numPages: 64, worldSize: 2 },
  { kind: "reserve", namespace: "kv", rank: 1, page: 3, key: "a/b", parent: "a", expiresAtMs: 1_700_000_000_000 },
  { kind: "reserve", namespace: "kv", rank: 0, page: 4, key: "o", parent: null, expiresAtMs: 5 },
  { kind: "unreserve", namespace: "kv", rank: 1, page: 3, confirmed: true },
  { kind: "unreserve", namespace: "other", rank: 0, page: 9 },
  { kind: "key", namespace: "kv", key: "a/b", parent: "a", complete: true, pages: [0, 7, 1, 3] },
  { kind: "key", namespace: "kv", key: "r", parent: "", complete: false, pages: [] },
  { kind: "forget", namespace: "kv", key: "a/b" },
  { kind: "drain", namespace: "kv", rank: 1, page: 3, key: "a/b", untilMs: 42 },
  { kind: "undrain", namespace: "kv", rank: 1, page: 3 },
  { kind: "unrank", namespace: "other", rank: 0 },
  { kind: "key", namespace: N, key: K, parent: "", complete: true, pages: [0, 1] },
  { kind: "forget", namespace: N, key: K },
  { kind: "drop", namespace: "other" },
];

/** LOG is SAMPLE as the log's group value holds it: the namespaces, then a tuple per change naming its namespace by index. */
const LOG = [
  ["kv", "other", N],
  [
    [0, 0, 1, 64, 2],
    [1, 0, 1, 3, "a/b", 1700000000000, "a"],
    [1, 0, 0, 4, "o", 5, null],
    [2, 0, 1, 3, 1],
    [2, 1, 0, 9],
    [3, 0, "a/b", 1, [0, 7, 1, 3], "a"],
    [3, 0, "r", 0, [], ""],
    [4, 0, "a/b"],
    [5, 0, 1, 3, "a/b", 42],
    [6, 0, 1, 3],
    [7, 1, 0],
    [3, 2, K, 1, [0, 1], ""],
    [4, 2, K],
    [8, 1],
  ],
];

const LONG = "jmY1IX6jwSOBfvB22KauFOauQkYNAB+oLQLEcyUvlqs=";
/** STORE is SAMPLE as the LMDB store writes it (schema.ts): a put per record, or a remove (no value); a drop is no one record (drop.test.ts). */
const STORE = [
  { db: "ranks", key: ["kv", 1], value: [64, 2] },
  { db: "reservations", key: ["kv", 1, 3], value: ["a/b", 1700000000000, "a"] },
  { db: "reservations", key: ["kv", 0, 4], value: ["o", 5, null] },
  { db: "reservations", key: ["kv", 1, 3], value: undefined },
  { db: "reservations", key: ["other", 0, 9], value: undefined },
  { db: "keys", key: ["kv", "a/b"], value: [1, "a", 0, 7, 1, 3] },
  { db: "keys", key: ["kv", "r"], value: [0, ""] },
  { db: "keys", key: ["kv", "a/b"], value: undefined },
  { db: "drains", key: ["kv", 1, 3], value: ["a/b", 42] },
  { db: "drains", key: ["kv", 1, 3], value: undefined },
  { db: "ranks", key: ["other", 0], value: undefined },
  { db: "long_keys", key: LONG, value: [N, K, 1, "", 0, 1] },
  { db: "long_keys", key: LONG, value: undefined },
];

const packr = new Packr({ useRecords: false, moreTypes: false });

describe("the record formats", () => {
  it("cover every kind of change", () => {
    expect(new Set(SAMPLE.map((c) => c.kind))).toEqual(new Set(Object.keys(CHANGE_FORMATS)));
  });

  it("the log encodes each kind as the tuple earlier servers wrote, and decodes it back", () => {
    const bytes = encodeGroup(SAMPLE);
    expect(packr.unpack(bytes)).toEqual(LOG);
    expect(decodeGroup(packr.pack(LOG))).toEqual(SAMPLE);
  });

  it("the log reads a leader's records from before parents were kept as roots", () => {
    const old = [
      ["kv"],
      [
        [1, 0, 1, 3, "a/b", 9],
        [3, 0, "a/b", 1, [1, 3]],
      ],
    ];
    expect(decodeGroup(packr.pack(old))).toEqual([
      { kind: "reserve", namespace: "kv", rank: 1, page: 3, key: "a/b", parent: "", expiresAtMs: 9 },
      { kind: "key", namespace: "kv", key: "a/b", parent: "", complete: true, pages: [1, 3] },
    ]);
  });

  it("the store writes each kind as the record earlier servers wrote", () => {
    expect(SAMPLE.filter((c) => c.kind !== "drop").map(writeOf)).toEqual(STORE);
    expect(() => writeOf({ kind: "drop", namespace: "kv" })).toThrow(/namespace's records/);
  });

  it("the store reads each record it writes back as its change, of every layout", () => {
    const puts = STORE.map((write, i) => [write, SAMPLE[i]] as const).filter(([write]) => write.value !== undefined);
    expect(puts.map(([write]) => write.db)).toEqual(["ranks", "reservations", "reservations", "keys", "keys", "drains", "long_keys"]);
    for (const [write, change] of puts) expect(storedChange(write.db as "keys", write.key, write.value)).toEqual(change);
    // Before version 3 a key record had no parent, and a reservation none either: both read as roots.
    expect(storedChange("keys", ["kv", "a/b"], [1, 0, 7, 1, 3])).toEqual({ ...SAMPLE[5], parent: "" });
    expect(storedChange("reservations", ["kv", 1, 3], ["a/b", 9])).toEqual({ ...SAMPLE[1], parent: "", expiresAtMs: 9 });
  });
});

describe("a rank's layout (InitializeRank's layout)", () => {
  const withLayout: Change = { kind: "rank", namespace: "kv", rank: 1, numPages: 64, worldSize: 2, layout: "llama-3-8b bf16 64 KiB tp2" };

  it("goes at the end of the rank's log tuple and store record, which servers from before layouts wrote without it", () => {
    expect(packr.unpack(encodeGroup([withLayout]))).toEqual([["kv"], [[0, 0, 1, 64, 2, "llama-3-8b bf16 64 KiB tp2"]]]);
    expect(decodeGroup(encodeGroup([withLayout]))).toEqual([withLayout]);
    expect(writeOf(withLayout)).toEqual({ db: "ranks", key: ["kv", 1], value: [64, 2, "llama-3-8b bf16 64 KiB tp2"] });
    expect(storedChange("ranks", ["kv", 1], [64, 2, "llama-3-8b bf16 64 KiB tp2"])).toEqual(withLayout);
    // Records without one (every record before layouts, and a namespace made without one) read as no layout.
    expect(storedChange("ranks", ["kv", 1], [64, 2])).toEqual(SAMPLE[0]);
  });
});
