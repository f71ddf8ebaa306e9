// b1-clients.ts [--runs=N] [--seconds=S]: server CPU per call of the B=1, C=16 cycle with the lean
// gRPC client and with @grpc/grpc-js, alternated on one in-memory server so both see the same
// machine. Also lean at C=4, to see server CPU per call at a lower call rate. Run: node --import tsx bench/b1-clients.ts
import type { LoadConfig, LoadResult } from "./load.js";
import { runLoad, startProcess } from "./processes.js";

const flag = (name: string, fallback: number) => Number(process.argv.find((a) => a.startsWith(`--${name}=`))?.split("=")[1] ?? fallback);
const runs = flag("runs", 3);
const seconds = flag("seconds", 4);
const server = await startProcess("src/server/main.ts", ["serve", "--in-memory", "--host", "127.0.0.1", "--port", "0", "--read-lease-ttl", "50ms"]);
const rows: [LoadConfig["transport"], number][] = [
  ["grpc-js", 16],
  ["lean-grpc", 16],
  ["lean-grpc", 4],
];
let offset = 0;
try {
  for (let run = 0; run < runs; run++) {
    for (const [transport, concurrency] of rows) {
      const config: LoadConfig = {
        url: server.url,
        transport,
        batch: 1,
        concurrency,
        connections: 1,
        ranks: 8,
        numPages: 100_000,
        warmupMs: 1_000,
        durationMs: seconds * 1_000,
        keyOffset: (offset += 1e7),
      };
      const { result, serverCpuMs } = await runLoad<LoadResult>(config, server.pid);
      const calls = result.cycles * 4;
      console.log(
        `${transport.padEnd(10)} C=${String(concurrency).padEnd(3)} calls/s ${Math.round(calls / (result.elapsedMs / 1000))
          .toString()
          .padStart(
            6,
          )}  server ${((serverCpuMs * 1000) / calls).toFixed(1).padStart(6)} µs/call  client ${((result.clientCpuMs * 1000) / calls).toFixed(1).padStart(6)} µs/call`,
      );
    }
  }
} finally {
  await server.stop();
}
