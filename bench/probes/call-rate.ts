// call-rate.ts [--rates=30,180,2000] [--rounds=2]: what one call costs a server as the rate of calls falls. The cycle at B=1
// (four calls: allocate, confirm, exists, locate; lean gRPC client, C=16, one connection) paced to each rate in cycles a
// second, against the bare node:http2 server of the floor workload (harness/bare-http2-server.ts: each method's answer
// to a 1-key call, fixed) and against the in-memory server, alternated; prints the server's CPU per call (/proc, 4 s after 3 s of warm-up). A
// comparison of shards at one rate gives each server a share of the calls, so this is the cost it pays per call there.
// Run: node --import tsx bench/probes/call-rate.ts
import type { LoadConfig, LoadResult } from "../harness/load.js";
import { numberOption, option } from "../harness/options.js";
import { runLoad, SERVER, serverArgs, startProcess } from "../harness/processes.js";

const rates = option("rates", "30,180,2000").split(",").map(Number);
const rounds = numberOption("rounds", 2);

for (let round = 0; round < rounds; round++)
  for (const cyclesPerSecond of rates)
    for (const kind of ["bare", "server"] as const) {
      const server =
        kind === "bare" ? await startProcess("bench/harness/bare-http2-server.ts", ["1"]) : await startProcess(SERVER, serverArgs(["--in-memory"]));
      try {
        const config: LoadConfig = {
          url: server.url,
          transport: "lean-grpc",
          batch: 1,
          concurrency: 16,
          connections: 1,
          ranks: 8,
          numPages: 1_000_000,
          warmupMs: 3_000,
          durationMs: 4_000,
          keyOffset: 9e10 + round * 1e9 + cyclesPerSecond * 1e5,
          cyclesPerSecond,
        };
        const { result, serverCpuMs } = await runLoad<LoadResult>(config, server.pid);
        const calls = result.cycles * 4;
        const perSecond = calls / (result.elapsedMs / 1_000);
        console.log(
          `call-rate round ${round} ${kind.padEnd(6)} ${Math.round(perSecond)} calls/s: ${((serverCpuMs * 1_000) / calls).toFixed(0)} µs of server CPU per call`,
        );
      } finally {
        await server.stop();
      }
    }
