// flood-probe.ts [--pairs=N] [--root=DIR]: hash flooding against the key registry. 2^N distinct UTF-8 keys
// of 8N bytes that share one MurmurHash3 under every seed (bench/harness/murmur-collisions.ts), against as
// many ordinary keys of the same length: the core's time to allocate them 512 per call, then to find them
// all in one BatchExists. --root runs another checkout's core (the same keys).
// Run: node --import tsx bench/probes/flood-probe.ts --pairs=12
import { resolve } from "node:path";
import { murmurCollisions } from "../harness/murmur-collisions.js";
import { option } from "../harness/options.js";

const root = resolve(option("root", new URL("../..", import.meta.url).pathname));
const pairs = Number(option("pairs", "12"));
const { MetadataState } = await import(`${root}/src/core/state.ts`);

const colliding = murmurCollisions(pairs);
const ordinary = colliding.map((_, i) => `k${i}`.padEnd(Buffer.byteLength(colliding[0]!), "x"));
for (const [name, keys] of [
  ["ordinary", ordinary],
  ["colliding", colliding],
] as const) {
  const state = new MetadataState(() => 0, {}, false);
  state.initializeRank("", 0, keys.length, 1);
  const t0 = performance.now();
  for (let i = 0; i < keys.length; i += 512) state.batchAllocate("", 0, keys.slice(i, i + 512));
  const t1 = performance.now();
  state.batchExists("", keys);
  const t2 = performance.now();
  console.log(`${name.padEnd(9)} ${keys.length} keys: ${(t1 - t0).toFixed(0)} ms to allocate, ${(t2 - t1).toFixed(0)} ms to find them all`);
}
