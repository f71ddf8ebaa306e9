/**
 * overload-burst: what shedding does to a burst well above capacity. Starts
 * `serve --in-memory` with and without `--overload-lag`, sends `--calls`
 * (default 400) concurrent BatchAllocate calls of `--batch` (default 4,000)
 * keys at once from `--clients` (default 4) connections (the lean client,
 * requests encoded before the burst, so that the client adds little), with
 * no retries, and prints per run how many were served and shed and the
 * slowest answer of each kind. `--warmup N` first sends N calls of the
 * same size (not counted) and then restarts the server's loop-delay count,
 * so that the burst meets code that is already compiled, as on a server
 * that has been running.
 * Run: node --import tsx bench/probes/overload-burst.ts [--lag 100ms] [--server-args "..."]
 */
import { parseArgs } from "node:util";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { MetadataService } from "../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { LeanGrpc } from "../harness/lean-grpc.js";
import { startProcess } from "../harness/processes.js";
import { batchAllocateFrame } from "../harness/request-frames.js";

const { values } = parseArgs({
  options: {
    lag: { type: "string", default: "100ms" },
    calls: { type: "string", default: "400" },
    batch: { type: "string", default: "4000" },
    clients: { type: "string", default: "4" },
    /** server-args are more options for both servers, space-separated (say, "--max-streams-per-connection 100"). */
    "server-args": { type: "string", default: "" },
    warmup: { type: "string", default: "0" },
  },
});
const calls = Number(values.calls);
const batch = Number(values.batch);
const warmup = Number(values.warmup);

for (const lag of ["0", values.lag!]) {
  const server = await startProcess(
    "src/cli/bin.mjs",
    ["serve", "--in-memory", "--port", "0", "--overload-lag", lag, ...values["server-args"]!.split(" ").filter(Boolean)],
    ["--import", "./bench/harness/loop-delay.mjs"],
  );
  try {
    await createClient(MetadataService, createGrpcTransport({ baseUrl: server.url })).initializeRank({
      rank: 0,
      numPages: (calls + warmup) * batch,
      worldSize: 1,
    });
    const clients = Array.from({ length: Number(values.clients) }, () => new LeanGrpc(server.url));
    if (warmup > 0) {
      const keys = (c: number) => Array.from({ length: batch }, (_, i) => `warmup-${c}-${i}`);
      await Promise.all(
        Array.from({ length: warmup }, (_, c) =>
          clients[c % clients.length]!.callFramed(`/${MetadataService.typeName}/BatchAllocate`, batchAllocateFrame("", 0, keys(c), [])).catch(() => undefined),
        ),
      );
      process.kill(server.pid, "SIGUSR2");
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    const frames = Array.from({ length: calls }, (_, c) =>
      batchAllocateFrame(
        "",
        0,
        Array.from({ length: batch }, (_, i) => `burst-${c}-${i}`),
        [],
      ),
    );
    const slowest: Record<string, number> = {};
    const counts: Record<string, number> = {};
    const started = performance.now();
    await Promise.all(
      frames.map(async (frame, c) => {
        let kind = "served";
        try {
          await clients[c % clients.length]!.callFramed(`/${MetadataService.typeName}/BatchAllocate`, frame);
        } catch (e) {
          kind = (e as Error).message.includes("grpc-status 14") ? "overloaded" : (e as Error).message;
        }
        counts[kind] = (counts[kind] ?? 0) + 1;
        slowest[kind] = Math.max(slowest[kind] ?? 0, Math.round(performance.now() - started));
      }),
    );
    for (const client of clients) client.close();
    console.log(JSON.stringify({ overloadLag: lag, calls, batch, counts, slowestMs: slowest, totalMs: Math.round(performance.now() - started) }));
  } finally {
    await server.stop();
  }
}
