// Aggregate key operations per second of a cluster of S shards (npm run bench -- --only=shard-scale):
// S in-memory servers (--shards S --shard K), and for each shard an engine pod's worth of load: a
// relay in front of every shard and a load process of the cycle at B=128, C=16 through it. S = 1,
// 2, 4, 8 while the machine has the cores for it (about 2 per shard: the shard's server, and its
// pod's relay and load); on fewer it says where it stops and why. Reported per S: keys/s of every
// load together, and that over S=1's.

import { availableParallelism } from "node:os";
import { HealthCheckResponse_ServingStatus as ServingStatus } from "../../gen/grpc/health/v1/health_pb.js";
import { createHealthClient } from "../../src/client/index.js";
import type { LoadResult } from "../harness/load.js";
import { cycleConfig, runLoad, SERVER, serverArgs, startProcess } from "../harness/processes.js";

/** ScaleRow is one measured cluster of S shards, in one alternation (`round`). */
export interface ScaleRow {
  round: number;
  shards: number;
  cores: number;
  keysPerSec: number;
  /** overOneShard is keysPerSec over S=1's of the same round. */
  overOneShard: number;
  errors: number;
}

/** scaleCounts are the S this machine can show: 1, 2, 4, 8 up to half its cores (at least 1 and 2, to show the cost). */
export function scaleCounts(cores = availableParallelism()): number[] {
  return [1, 2, 4, 8].filter((s) => s <= Math.max(2, Math.floor(cores / 2)));
}

/** measureShardScale runs each S of scaleCounts, `rounds` times alternated, on fresh processes, and reports the keys per second of all loads together. */
export async function measureShardScale(rounds: number, timing: { warmupMs: number; durationMs: number }): Promise<ScaleRow[]> {
  const cores = availableParallelism();
  const counts = scaleCounts(cores);
  if (counts.at(-1)! < 8) {
    console.log(`shard-scale stops at S=${counts.at(-1)}: ${cores} cores; S shards with an engine pod each (relay and load) need about 2×S cores to add up`);
  }
  const rows: ScaleRow[] = [];
  for (let round = 0; round < rounds; round++) for (const count of counts) rows.push(await measureOne(round, count, cores, rows, timing));
  return rows;
}

/** measureOne runs S = `count` shards with a relay and a load each, once. */
async function measureOne(
  round: number,
  count: number,
  cores: number,
  rows: readonly ScaleRow[],
  timing: { warmupMs: number; durationMs: number },
): Promise<ScaleRow> {
  const shardArgs = (shard: number) => (count > 1 ? ["--shards", String(count), "--shard", String(shard)] : []);
  const servers = await Promise.all(Array.from({ length: count }, (_, shard) => startProcess(SERVER, serverArgs(["--in-memory", ...shardArgs(shard)]))));
  const upstream = servers.map((s) => s.url).join(";");
  const relays = await Promise.all(servers.map(() => startProcess(SERVER, ["relay", "--host", "127.0.0.1", "--port", "0", "--upstream", upstream])));
  try {
    // A relay of several shards serves once it reached every shard's leader: a load begun before measured nothing (0 keys/s at --quick).
    await Promise.all(relays.map((relay) => untilServing(relay.url)));
    const loads = await Promise.all(
      relays.map((relay, i) =>
        runLoad<LoadResult>(
          cycleConfig(relay.url, { transport: "lean-grpc", batch: 128, concurrency: 16, connections: 1, keyOffset: (i + 1) * 1e9, ...timing }),
          relay.pid,
        ),
      ),
    );
    const keysPerSec = loads.reduce((sum, { result }) => sum + result.keys / (result.elapsedMs / 1_000), 0);
    const one = rows.find((r) => r.round === round && r.shards === 1);
    const row: ScaleRow = {
      round,
      shards: count,
      cores,
      keysPerSec,
      overOneShard: one === undefined ? 1 : keysPerSec / one.keysPerSec,
      errors: loads.reduce((sum, { result }) => sum + result.errors, 0),
    };
    console.log(
      `shard-scale S=${count} (${count} relays and loads, B=128 C=16 each, ${cores} cores): ${Math.round(keysPerSec)} keys/s in all, ${row.overOneShard.toFixed(2)} × S=1, ${row.errors} errors`,
    );
    return row;
  } finally {
    await Promise.all([...relays, ...servers].map((p) => p.stop()));
  }
}

/** untilServing waits until a relay's health says SERVING (it reaches every shard's leader), at most 10 s. */
async function untilServing(url: string): Promise<void> {
  const health = createHealthClient({ baseUrl: url });
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline) {
    const res = await health.check({ service: "" }, { timeoutMs: 1_000 }).catch(() => undefined);
    if (res?.status === ServingStatus.SERVING) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`the relay at ${url} did not serve within 10 s`);
}
