// The cost of shards, side by side in one run (npm run bench -- --only=shards): the cycle at B=128
// (the largest batch vLLM's workers send), C=16, through a relay in front of S in-memory servers,
// one per shard (--shards S --shard K), for S = 1, 2, 4, alternated. On 2 cores the point is the
// cost, not a speed-up: every process shares the same cores. Reported per key: the CPU of every
// server and of the relay together, that total over S=1's in the same round, and the relay's own
// (its fan-out: the split, the parallel parts, the merge). Unpaced, S=1 runs at a higher rate than
// S>1 on the same cores, and a call's fixed costs shrink per key with the rate (more calls per
// Batch, per read and per write): `measureShardsAtOneRate` compares S=1 and each S>1 paced to one
// rate, below what that S reached unpaced.
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
  /** overOneShard is totalCpuPerKeyUs over S=1's of the same round (and pace). */
  overOneShard: number;
  /** pacedKeysPerSec is the rate the load was paced to; 0: unpaced. */
  pacedKeysPerSec: number;
  errors: number;
}

/** measureShards runs each S in `counts`, `rounds` times alternated, each on fresh servers and a fresh relay; paced to `keysPerSecond` in all unless 0. */
export async function measureShards(
  counts: readonly number[],
  rounds: number,
  timing: { warmupMs: number; durationMs: number },
  keysPerSecond = 0,
): Promise<ShardRow[]> {
  const rows: ShardRow[] = [];
  let offset = 9e9;
  for (let round = 0; round < rounds; round++) {
    for (const count of counts) {
      const { servers, relay, stop } = await startShards(SERVER, serverArgs(["--in-memory"]), count);
      try {
        offset += 1e9;
        const config = cycleConfig(relay.url, { transport: "lean-grpc", batch: 128, concurrency: 16, connections: 1, keyOffset: offset, ...timing });
        if (keysPerSecond > 0) config.cyclesPerSecond = keysPerSecond / config.batch;
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
          pacedKeysPerSec: keysPerSecond,
          errors: result.errors,
        };
        row.overOneShard = one === undefined ? 1 : row.totalCpuPerKeyUs / one.totalCpuPerKeyUs;
        const paced = keysPerSecond > 0 ? ` paced to ${keysPerSecond}` : "";
        console.log(
          `shards    S=${count} B=128 C=16${paced}: ${Math.round(row.keysPerSec)} keys/s, servers and relay ${row.totalCpuPerKeyUs.toFixed(2)} µs/key (${row.overOneShard.toFixed(2)} × S=1), relay ${row.relayCpuPerKeyUs.toFixed(2)} µs/key, ${row.errors} errors`,
        );
        rows.push(row);
      } finally {
        await stop();
      }
    }
  }
  return rows;
}

/** PACE is the share of an S's unpaced rate that it and S=1 are paced to: below its ceiling, so that both keep the rate. */
const PACE = 0.8;

/**
 * measureShardsAtOneRate compares, for each S > 1 of `unpaced` (rows of
 * measureShards), S=1 and S alternated, both paced to PACE of the lowest
 * rate S reached unpaced (rounded to thousands).
 */
export async function measureShardsAtOneRate(
  unpaced: readonly ShardRow[],
  rounds: number,
  timing: { warmupMs: number; durationMs: number },
): Promise<ShardRow[]> {
  const rows: ShardRow[] = [];
  for (const count of [...new Set(unpaced.map((r) => r.shards))].filter((s) => s > 1)) {
    const slowest = Math.min(...unpaced.filter((r) => r.shards === count).map((r) => r.keysPerSec));
    const rate = Math.max(1_000, Math.round((slowest * PACE) / 1_000) * 1_000);
    rows.push(...(await measureShards([1, count], rounds, timing, rate)));
  }
  return rows;
}
