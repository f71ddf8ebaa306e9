// The cost of shards, side by side in one run (npm run bench -- --only=shards): the cycle at B=128
// (the largest batch vLLM's workers send), C=16, through a relay in front of S in-memory servers,
// one per shard (--shards S --shard K), for S = 1, 2, 4, alternated. On 2 cores the point is the
// cost, not a speed-up: every process shares the same cores. Reported per key: the CPU of every
// server and of the relay together, that total over S=1's in the same round, and the relay's own
// (its fan-out: the split, the parallel parts, the merge).

import type { LoadResult } from "../harness/load.js";
import { cycleConfig, runLoad, SERVER, serverArgs, startShards } from "../harness/processes.js";

/** ShardRow is one measured cluster of S shards, in one alternation (`round`). */
export interface ShardRow {
  round: number;
  shards: number;
  keysPerSec: number;
  /** totalCpuPerKeyUs is the CPU of the servers and the relay together, per key. */
  totalCpuPerKeyUs: number;
  relayCpuPerKeyUs: number;
  /** overOneShard is totalCpuPerKeyUs over S=1's of the same round. */
  overOneShard: number;
  errors: number;
}

/** measureShards runs each S in `counts`, `rounds` times alternated, each on fresh servers and a fresh relay. */
export async function measureShards(counts: readonly number[], rounds: number, timing: { warmupMs: number; durationMs: number }): Promise<ShardRow[]> {
  const rows: ShardRow[] = [];
  let offset = 9e9;
  for (let round = 0; round < rounds; round++) {
    for (const count of counts) {
      const { servers, relay, stop } = await startShards(SERVER, serverArgs(["--in-memory"]), count);
      try {
        offset += 1e9;
        const config = cycleConfig(relay.url, { transport: "lean-grpc", batch: 128, concurrency: 16, connections: 1, keyOffset: offset, ...timing });
        const [first, ...others] = servers;
        const { result, serverCpuMs, otherCpuMs } = await runLoad<LoadResult>(config, first!.pid, [relay.pid, ...others.map((s) => s.pid)]);
        const keys = Math.max(result.keys, 1);
        const [relayCpuMs, ...otherServersCpuMs] = otherCpuMs;
        const totalCpuMs = serverCpuMs + relayCpuMs! + otherServersCpuMs.reduce((a, b) => a + b, 0);
        const one = rows.find((r) => r.round === round && r.shards === 1);
        const row: ShardRow = {
          round,
          shards: count,
          keysPerSec: result.keys / (result.elapsedMs / 1_000),
          totalCpuPerKeyUs: (totalCpuMs * 1_000) / keys,
          relayCpuPerKeyUs: (relayCpuMs! * 1_000) / keys,
          overOneShard: 0,
          errors: result.errors,
        };
        row.overOneShard = one === undefined ? 1 : row.totalCpuPerKeyUs / one.totalCpuPerKeyUs;
        console.log(
          `shards    S=${count} B=128 C=16: ${Math.round(row.keysPerSec)} keys/s, servers and relay ${row.totalCpuPerKeyUs.toFixed(2)} µs/key (${row.overOneShard.toFixed(2)} × S=1), relay ${row.relayCpuPerKeyUs.toFixed(2)} µs/key, ${row.errors} errors`,
        );
        rows.push(row);
      } finally {
        await stop();
      }
    }
  }
  return rows;
}
