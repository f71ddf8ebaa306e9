// growth-probe.ts [--keys=N]: the pauses of the registry's growth. One rank takes N keys, 512 new
// ones per call (BatchAllocate, then ConfirmWrite), as request bytes; every call is timed, and the
// slowest are printed with the key count they happened at: those are the doublings of the bucket
// table, the key arena, the key columns and the page columns, which copy or rebuild in one step.
// Run: node --expose-gc --import tsx bench/probes/growth-probe.ts --keys=4000000
import { KeyList } from "../../src/core/key-list.js";
import { MetadataState } from "../../src/core/state.js";
import { numberOption } from "../harness/options.js";

const keys = numberOption("keys", 4_000_000);
const B = 512;
const state = new MetadataState(() => 0, {}, false);
state.initializeRank("", 0, keys, 1);
const bytes = Buffer.alloc(B * 64);
const starts = Array.from({ length: B }, (_, i) => i * 64);
const ends = starts.map((s) => s + 64);
const calls: { atKeys: number; ms: number }[] = [];
for (let done = 0; done < keys; done += B) {
  for (let i = 0; i < B; i++) bytes.write((done + i).toString(16).padStart(64, "0"), i * 64, "latin1");
  const t0 = performance.now();
  const { pages } = state.batchAllocate("", 0, new KeyList(bytes, starts, ends));
  state.confirmWrite("", 0, new KeyList(bytes, starts, ends), pages);
  calls.push({ atKeys: done, ms: performance.now() - t0 });
}
const sorted = calls.map((c) => c.ms).sort((a, b) => a - b);
console.log(
  `${keys} keys, ${calls.length} calls of ${B}: median ${sorted[calls.length >> 1]!.toFixed(2)} ms, p99 ${sorted[Math.floor(calls.length * 0.99)]!.toFixed(2)} ms`,
);
for (const c of calls.sort((a, b) => b.ms - a.ms).slice(0, 8)) console.log(`  ${c.ms.toFixed(1)} ms at ${c.atKeys} keys`);
