// map-probe.ts: what one lookup in a JavaScript Map of 64-character keys
// costs on this machine as the map grows: the key registry and the
// reservations are such maps, and each RPC brings its keys as new strings,
// so every lookup hashes the key and walks a bucket of a table much larger
// than the caches. This is why the core's cost per page operation grows with
// the number of keys although every operation is O(1).
// Run: node --import tsx bench/probes/map-probe.ts
import { randomBytes } from "node:crypto";

const LOOKUPS = 200_000;
const newKeys = (n: number) => Array.from({ length: n }, () => randomBytes(32).toString("hex"));
/** copies gives each key as a new string, as a decoded request does (its hash not computed yet). */
const copies = (keys: string[]) => keys.map((k) => Buffer.from(k, "latin1").toString("latin1"));

/** nsPerLookup looks every key up, checks that `expectFound` of them were there, and returns the time per lookup. */
function nsPerLookup(map: Map<string, object>, keys: string[], expectFound: number): number {
  let found = 0;
  const started = performance.now();
  for (const key of keys) if (map.get(key) !== undefined) found++;
  const ns = ((performance.now() - started) / keys.length) * 1e6;
  if (found !== expectFound) throw new Error(`found ${found} keys, expected ${expectFound}`);
  return ns;
}

for (const size of [1_000, 100_000, 1_000_000, 4_000_000]) {
  const keys = newKeys(size);
  const map = new Map<string, object>(keys.map((k) => [k, { k }]));
  const hits = copies(Array.from({ length: LOOKUPS }, (_, i) => keys[(i * 7_919) % size]!));
  const misses = newKeys(LOOKUPS);
  nsPerLookup(map, copies(hits.slice(0, 10_000)), 10_000); // warm up the JIT
  const hit = nsPerLookup(map, hits, LOOKUPS);
  const miss = nsPerLookup(map, misses, 0);
  console.log(`${String(size).padStart(9)} keys: hit ${hit.toFixed(0)} ns, miss ${miss.toFixed(0)} ns per lookup of a new 64-character string`);
}
