/**
 * overload-burst: what shedding does to a burst well above capacity. Starts
 * `serve --in-memory` with and without `--overload-lag`, sends `--calls`
 * (default 400) concurrent BatchAllocate calls of `--batch` (default 4,000)
 * keys at once from `--clients` (default 4) connections (the lean client,
 * requests encoded before the burst, so that the client adds little), with
 * no retries, and prints per run how many were served and shed and the
 * slowest answer of each kind.
 * Run: node --import tsx bench/overload-burst.ts [--lag 100ms]
 */
import { parseArgs } from "node:util";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { MetadataService } from "../gen/hf3fs/metadata/v1/metadata_pb.js";
import { LeanGrpc } from "./lean-grpc.js";
import { startProcess } from "./processes.js";
import { batchAllocateFrame } from "./request-frames.js";

const { values } = parseArgs({
  options: {
    lag: { type: "string", default: "100ms" },
    calls: { type: "string", default: "400" },
    batch: { type: "string", default: "4000" },
    clients: { type: "string", default: "4" },
  },
});
const calls = Number(values.calls);
const batch = Number(values.batch);

for (const lag of ["0", values.lag!]) {
  const server = await startProcess(
    "src/server/bin.mjs",
    ["serve", "--in-memory", "--port", "0", "--overload-lag", lag],
    ["--import", "./bench/loop-delay.mjs"],
  );
  try {
    await createClient(MetadataService, createGrpcTransport({ baseUrl: server.url })).initializeRank({ rank: 0, numPages: calls * batch, worldSize: 1 });
    const clients = Array.from({ length: Number(values.clients) }, () => new LeanGrpc(server.url));
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
