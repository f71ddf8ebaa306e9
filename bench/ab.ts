// ab.ts --root=DIR [--batch=B] [--rounds=N] [--seconds=S] [--transport=T]: the cycle (lean gRPC client unless T, C=16, 8 ranks
// of 100,000 pages, in-memory) against this checkout's server and another checkout's (DIR), alternated
// N times, each run on a fresh server; prints the server's CPU per key and per call of each run. How
// the README's before/after figures of a change are measured. Run: node --import tsx bench/ab.ts --root=/tmp/before
import { existsSync } from "node:fs";
import { relative, resolve } from "node:path";
import type { TransportName } from "./harness/cycle-clients.js";
import type { LoadResult } from "./harness/load.js";
import { option } from "./harness/options.js";
import { cycleConfig, runLoad, startProcess } from "./harness/processes.js";

const here = resolve(new URL("..", import.meta.url).pathname);
const other = resolve(option("root", here));
const batch = Number(option("batch", "512"));
const rounds = Number(option("rounds", "3"));
const seconds = Number(option("seconds", "4"));
const transport = option("transport", "lean-grpc") as TransportName;

async function run(root: string): Promise<string> {
  const serve = ["serve", "--in-memory", "--host", "127.0.0.1", "--port", "0", "--read-lease-ttl", "50ms"];
  // Checkouts from before src/cli/ kept the CLI in src/server/.
  const main = existsSync(`${root}/src/cli/main.ts`) ? `${root}/src/cli/main.ts` : `${root}/src/server/main.ts`;
  const server = await startProcess(relative(here, main), serve);
  const config = cycleConfig(server.url, { batch, transport, connections: transport === "lean-grpc" ? 2 : 1, durationMs: seconds * 1_000 });
  const { result, serverCpuMs } = await runLoad<LoadResult>(config, server.pid);
  await server.stop();
  const perKey = (serverCpuMs * 1_000) / Math.max(1, result.keys);
  const perCall = (serverCpuMs * 1_000) / (result.cycles * 4);
  return `${perKey.toFixed(2)} µs/key, ${perCall.toFixed(0)} µs/call, ${Math.round(result.keys / seconds)} keys/s`;
}

for (let round = 0; round < rounds; round++) {
  for (const root of [other, here]) console.log(`B=${batch} ${root === here ? "this checkout" : root}: ${await run(root)}`);
}
