// client-gathering.ts [--batch=B] [--rounds=R] [--seconds=S]: what the TypeScript client's gathering saves a server.
// The cycle (C=16 workers in one client process, 8 ranks, in-memory) through createMetadataClient, its calls gathered
// into Batches while two are on their way (`ts-client`) against each call alone (`ts-client-alone`: each call given
// call options, empty headers, which keep it out of Batches and send nothing more), alternated R (3) times, each run on a fresh server; prints the server's CPU
// per key and the keys a second. Run: node --import tsx bench/probes/client-gathering.ts
import type { TransportName } from "../harness/cycle-clients.js";
import type { LoadResult } from "../harness/load.js";
import { numberOption } from "../harness/options.js";
import { cycleConfig, runLoad, SERVER, serverArgs, startProcess } from "../harness/processes.js";

const batch = numberOption("batch", 128);
const rounds = numberOption("rounds", 3);
const seconds = numberOption("seconds", 3);

let offset = 0;
for (let round = 0; round < rounds; round++) {
  for (const transport of (round % 2 === 0 ? ["ts-client", "ts-client-alone"] : ["ts-client-alone", "ts-client"]) as TransportName[]) {
    const server = await startProcess(SERVER, serverArgs(["--in-memory"]));
    try {
      offset += 1e9;
      const config = cycleConfig(server.url, { transport, batch, connections: 1, keyOffset: offset, durationMs: seconds * 1_000 });
      const { result, serverCpuMs } = await runLoad<LoadResult>(config, server.pid);
      const perKey = (serverCpuMs * 1_000) / Math.max(1, result.keys);
      console.log(`round ${round} ${transport.padEnd(15)} B=${batch}: server ${perKey.toFixed(2)} µs/key, ${Math.round(result.keys / seconds)} keys/s`);
    } finally {
      await server.stop();
    }
  }
}
