// clients.ts [--batch=B] [--runs=N] [--seconds=S]: server CPU per call and per key of the B, C=16
// cycle with the lean gRPC client and with @grpc/grpc-js, alternated on one in-memory server so
// both see the same machine; and lean at C=4, to see the server's CPU per call at a lower call
// rate. Run: node --import tsx bench/probes/clients.ts --batch=1
import type { LoadConfig, LoadResult } from "../harness/load.js";
import { numberOption } from "../harness/options.js";
import { runLoad, SERVER, serverArgs, startProcess } from "../harness/processes.js";

const batch = numberOption("batch", 1);
const runs = numberOption("runs", 3);
const seconds = numberOption("seconds", 4);
const rows: [LoadConfig["transport"], number][] = [
  ["grpc-js", 16],
  ["lean-grpc", 16],
  ["lean-grpc", 4],
];

const server = await startProcess(SERVER, serverArgs(["--in-memory"]));
let keyOffset = 0;
try {
  for (let run = 0; run < runs; run++) {
    for (const [transport, concurrency] of rows) {
      keyOffset += 1e8;
      const config: LoadConfig = {
        url: server.url,
        transport,
        batch,
        concurrency,
        connections: 1,
        ranks: 8,
        numPages: 100_000,
        warmupMs: 1_000,
        durationMs: seconds * 1_000,
        keyOffset,
      };
      const { result, serverCpuMs } = await runLoad<LoadResult>(config, server.pid);
      const calls = result.cycles * 4;
      const perCall = (serverCpuMs * 1_000) / calls;
      const perKey = (serverCpuMs * 1_000) / result.keys;
      const clientPerCall = (result.clientCpuMs * 1_000) / calls;
      const rate = Math.round(calls / (result.elapsedMs / 1_000));
      console.log(
        `B=${batch} ${transport} C=${concurrency}: ${rate} calls/s, server ${perCall.toFixed(1)} µs/call ${perKey.toFixed(2)} µs/key, client ${clientPerCall.toFixed(1)} µs/call`,
      );
    }
  }
} finally {
  await server.stop();
}
