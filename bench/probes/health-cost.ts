// health-cost.ts [--calls=N] [--rounds=R]: what a health check costs a server against a MetadataService call of the
// same size on its gRPC fast path: N (2,000) of each from 8 loops of the package's clients (grpc.health.v1 Check of
// MetadataService, as the `health` command and readiness probes ask it; BatchExists of one key, with call options so that it
// goes alone), R (3) rounds alternated, on one in-memory server. Prints the server's CPU per call.
// Run: node --import tsx bench/probes/health-cost.ts
import { MetadataService } from "../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { createHealthClient, createMetadataClient } from "../../src/client/index.js";
import { numberOption } from "../harness/options.js";
import { cpuMs, SERVER, serverArgs, startProcess } from "../harness/processes.js";

const calls = numberOption("calls", 2_000);
const rounds = numberOption("rounds", 3);

const server = await startProcess(SERVER, serverArgs(["--in-memory"]));
try {
  const health = createHealthClient({ baseUrl: server.url });
  const client = createMetadataClient({ baseUrl: server.url });
  await client.initializeRank({ rank: 0, numPages: 16 });
  const kinds = {
    "Health.Check": () => health.check({ service: MetadataService.typeName }),
    "BatchExists(1 key)": () => client.batchExists({ keys: ["a"] }, { headers: {} }),
  };
  for (let round = 0; round <= rounds; round++) {
    for (const [name, call] of Object.entries(kinds)) {
      const before = cpuMs(server.pid);
      await Promise.all(
        Array.from({ length: 8 }, async () => {
          for (let i = 0; i < calls / 8; i++) await call();
        }),
      );
      // Round 0 warms the server up and is not printed.
      if (round > 0) console.log(`round ${round} ${name.padEnd(18)} server ${(((cpuMs(server.pid) - before) * 1_000) / calls).toFixed(0)} µs per call`);
    }
  }
} finally {
  await server.stop();
}
