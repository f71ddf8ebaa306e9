// failover-rounds.ts [--rounds=N] [--kills=K]: failovers on fresh clusters under the load that
// precedes them in the benchmark. Each round starts 3 etcd members and 3 servers on this machine,
// runs the cycle at B=64, C=16 on the leader for 10 s (the log grows and is compacted meanwhile),
// then kills the leader K times (5) as `npm run bench -- --only=ha` does, and prints the failover
// times. N rounds (6). With BENCH_SERVER_LOGS=DIR the servers' logs are kept (processes.ts).
// Run: node --import tsx bench/probes/failover-rounds.ts
import { leaderOf, measureFailover, startHaCluster } from "../harness/ha.js";
import type { LoadResult } from "../harness/load.js";
import { option } from "../harness/options.js";
import { cycleConfig, runLoad, SERVER, serverArgs } from "../harness/processes.js";

const rounds = Number(option("rounds", "6"));
const kills = Number(option("kills", "5"));

const all: number[] = [];
for (let round = 1; round <= rounds; round++) {
  const cluster = await startHaCluster(SERVER, serverArgs);
  try {
    const leader = await leaderOf(cluster);
    await runLoad<LoadResult>(cycleConfig(leader.process.url, { batch: 64, warmupMs: 0, durationMs: 10_000, keyOffset: 1e9 }), leader.process.pid);
    const times = await measureFailover(cluster, kills);
    all.push(...times);
    console.log(`round ${round}: ${times.map((ms) => Math.round(ms).toLocaleString("en-US")).join(", ")} ms`);
  } finally {
    await cluster.stop();
  }
}
const sorted = all.sort((a, b) => a - b);
const at = (q: number) => Math.round(sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!).toLocaleString("en-US");
console.log(`${sorted.length} failovers: median ${at(0.5)} ms, max ${at(1)} ms`);
