// registry-probe.ts [--live=N] [--root=DIR]: the core alone under the cycle, keys arriving as
// request bytes (a KeyList, as the gRPC codecs hand them over; strings made from the same bytes on
// a checkout without KeyList, to compare with the code before keys were bytes). Each batch of 512
// fresh keys: BatchAllocate and ConfirmWrite on one of 8 ranks, BatchExists, GetLocations; the
// oldest batch is deleted past N live keys. Prints the core's CPU per key and cycle, then the
// cost of one registry lookup among the live keys, one key at a time and all of a call at once
// (findAll). Run: node --import tsx bench/probes/registry-probe.ts --live=800000
import { resolve } from "node:path";
import type { KeyList as KeyListOfThisCheckout } from "../../src/core/key-list.js";
import { namespacesOf } from "../../src/core/state.js";
import { option } from "../harness/options.js";

const root = resolve(option("root", new URL("../..", import.meta.url).pathname));
const live = Number(option("live", "200000"));
const B = 512;
const RANKS = 8;

const { MetadataState } = await import(`${root}/src/core/state.ts`);
const KeyList = await import(`${root}/src/core/key-list.ts`).then((m) => m.KeyList).catch(() => undefined);

let now = 1_000;
const state = new MetadataState(() => now, { readLeaseTtlMs: 0, incompleteTtlMs: 1e12, reservationTtlMs: 1e12 }, false);
for (let r = 0; r < RANKS; r++) state.initializeRank("", r, 1_000_000, RANKS);
const key = (i: number) => i.toString(16).padStart(64, "0");

/** request gives a call's keys as the core gets them from the codec: a KeyList over one buffer, or strings decoded from it. */
function request(keys: string[]): () => unknown {
  const bytes = Buffer.from(keys.join(""));
  const starts = keys.map((_, i) => i * 64);
  const ends = starts.map((s) => s + 64);
  return () => (KeyList ? new KeyList(bytes, starts, ends) : starts.map((s, i) => bytes.toString("utf8", s, ends[i])));
}

let next = 0;
const batches: string[][] = [];
function cycle(): void {
  const keys = Array.from({ length: B }, () => key(next++));
  const call = request(keys);
  const rank = next % RANKS;
  const { pages } = state.batchAllocate("", rank, call());
  state.confirmWrite("", rank, call(), pages);
  state.batchExists("", call());
  state.getLocations("", rank, call(), true);
  batches.push(keys);
  if (batches.length * B > live) state.deleteKeys("", batches.shift()!);
  now++;
}

for (let i = 0; i < (live / B) * 2; i++) cycle();
const cpu = process.cpuUsage();
const started = performance.now();
let cycles = 0;
for (; performance.now() - started < 3_000; cycles++) cycle();
const used = process.cpuUsage(cpu);
console.log(
  `${KeyList ? "keys as bytes" : "keys as strings"}, ${live} live keys: ${Math.round(((used.user + used.system) * 1_000) / (cycles * B))} ns of CPU per key and cycle`,
);

if (KeyList) {
  const ns = namespacesOf(state).get("kv")!; // reads the `namespaces` field, which every checkout since the key registry has
  const isFound = (x: unknown) => x !== undefined && x !== -1;
  const calls = batches.map((keys) => request(keys)() as KeyListOfThisCheckout);
  for (const mode of ["one at a time", "findAll"]) {
    let found = 0;
    let lookups = 0;
    const t0 = performance.now();
    while (performance.now() - t0 < 2_000) {
      const keys = calls[(Math.random() * calls.length) | 0]!;
      // (A checkout before the key columns finds records, undefined for none; since, entries, -1 for none.)
      if (mode === "findAll") for (const x of ns.findAll(keys)) found += x !== undefined && x !== -1 ? 1 : 0;
      else
        for (let i = 0; i < keys.length; i++)
          if (isFound(ns.keys.find(keys.bytes, keys.starts[i]!, keys.ends[i]!, keys.hash(i), (keys as { view?: DataView }).view))) found++;
      lookups += keys.length;
    }
    if (found !== lookups) throw new Error("a live key was not found");
    console.log(`lookup among ${live} keys, ${mode}: ${Math.round(((performance.now() - t0) * 1e6) / lookups)} ns`);
  }
}
