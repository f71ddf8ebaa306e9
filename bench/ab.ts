// ab.ts --root=DIR [--batch=B] [--rounds=N] [--seconds=S] [--warmup=S] [--transport=T] [--shards=K]: the cycle (lean gRPC client unless T, C=16,
// 8 ranks of 100,000 pages, in-memory) against this checkout's server and another checkout's (DIR), alternated
// N times, each run on a fresh server; prints the server's CPU per key and per call of each run. With
// --shards=K, through a relay in front of K servers, one per shard, and the CPU is theirs and the relay's (the relay's also alone);
// --shards=1,2 runs each K in turn for each checkout, and prints each K's CPU per key over the first's of the same checkout and round;
// --warmup is the seconds of calls before the counting starts (0.7).
// How the README's before/after figures of a change are measured. Run: node --import tsx bench/ab.ts --root=/tmp/before
import { existsSync } from "node:fs";
import { relative, resolve } from "node:path";
import { TRANSPORTS } from "./harness/cycle-clients.js";
import type { LoadResult } from "./harness/load.js";
import { choiceOption, option } from "./harness/options.js";
import { cycleConfig, runLoad, startProcess, startShards } from "./harness/processes.js";

const here = resolve(new URL("..", import.meta.url).pathname);
const other = resolve(option("root", here));
const batch = Number(option("batch", "512"));
const rounds = Number(option("rounds", "3"));
const seconds = Number(option("seconds", "4"));
const transport = choiceOption("transport", TRANSPORTS, "lean-grpc");
const shardCounts = option("shards", "0").split(",").map(Number);
const warmupMs = Number(option("warmup", "0.7")) * 1_000;

/** Run is one measured run: its line, and the CPU per key it measured. */
interface Run {
  line: string;
  perKey: number;
}

async function run(root: string, shards: number): Promise<Run> {
  const serve = ["serve", "--in-memory", "--host", "127.0.0.1", "--port", "0", "--read-lease-ttl", "50ms"];
  // Checkouts from before src/cli/ kept the CLI in src/server/.
  const main = relative(here, existsSync(`${root}/src/cli/main.ts`) ? `${root}/src/cli/main.ts` : `${root}/src/server/main.ts`);
  const sharded = shards > 0 ? await startShards(main, serve, shards) : undefined;
  const servers = sharded?.servers ?? [await startProcess(main, serve)];
  const relay = sharded?.relay;
  const config = cycleConfig((relay ?? servers[0]!).url, {
    batch,
    transport,
    connections: transport === "lean-grpc" ? 2 : 1,
    warmupMs,
    durationMs: seconds * 1_000,
  });
  const others = [...servers.slice(1), ...(relay === undefined ? [] : [relay])];
  const { result, serverCpuMs, otherCpuMs } = await runLoad<LoadResult>(
    config,
    servers[0]!.pid,
    others.map((p) => p.pid),
  );
  await (sharded?.stop() ?? servers[0]!.stop());
  const cpuMs = serverCpuMs + otherCpuMs.reduce((a, b) => a + b, 0);
  const perKey = (cpuMs * 1_000) / Math.max(1, result.keys);
  const perCall = (cpuMs * 1_000) / (result.cycles * 4);
  const relayPerKey = relay === undefined ? "" : `, the relay ${((otherCpuMs.at(-1)! * 1_000) / Math.max(1, result.keys)).toFixed(2)} µs/key`;
  const line = `${perKey.toFixed(2)} µs/key, ${perCall.toFixed(0)} µs/call, ${Math.round(result.keys / seconds)} keys/s${relay === undefined ? "" : ` (servers and relay, ${shards} shard${shards > 1 ? "s" : ""}${relayPerKey})`}`;
  return { line, perKey };
}

for (let round = 0; round < rounds; round++) {
  for (const root of [other, here]) {
    let first: number | undefined;
    for (const shards of shardCounts) {
      const { line, perKey } = await run(root, shards);
      first ??= perKey;
      const over = shardCounts.length > 1 ? `, ${(perKey / first).toFixed(2)} × K=${shardCounts[0]}` : "";
      console.log(`B=${batch} ${root === here ? "this checkout" : root}: ${line}${over}`);
    }
  }
}
