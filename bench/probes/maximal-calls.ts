/**
 * maximal-calls: what the largest allowed calls cost the other clients.
 * Starts `serve` on a temporary data dir, sends `--calls` concurrent
 * BatchAllocate calls of 65,536 keys of 1,024 bytes (64 MiB each) over gRPC,
 * and meanwhile, from another process (so that encoding the big calls does
 * not delay it), one BatchExists of one key at a time; prints the big
 * calls' durations, the small calls' worst latency, and the server's
 * worst and p99 event-loop delay (bench/harness/loop-delay.mjs).
 * Run: node --import tsx bench/probes/maximal-calls.ts [--calls 5]
 */
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { MetadataService } from "../../gen/hf3fs/metadata/v1/metadata_pb.js";

const { values } = parseArgs({
  options: { calls: { type: "string", default: "5" }, port: { type: "string", default: "18601" }, probe: { type: "boolean", default: false } },
});
if (values.probe) await probeSmallCalls(`http://127.0.0.1:${values.port}`);
const calls = Number(values.calls);
const dir = mkdtempSync(join(tmpdir(), "maximal-"));
const server = spawn(
  process.execPath,
  ["--import", "./bench/harness/loop-delay.mjs", "src/cli/bin.mjs", "serve", "--data-dir", dir, "--port", values.port!, "--log-level", "warn"],
  {
    stdio: ["ignore", "inherit", "pipe"],
  },
);
let serverStderr = "";
server.stderr.on("data", (d) => (serverStderr += d));
try {
  const baseUrl = `http://127.0.0.1:${values.port}`;
  const client = (await waitFor(() => connect(baseUrl)))!;
  await client.initializeRank({ rank: 0, numPages: calls * 65_536, worldSize: 1 });
  const probe = spawn(process.execPath, ["--import", "tsx", "bench/probes/maximal-calls.ts", "--probe", "--port", values.port!], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  let probeOutput = "";
  probe.stdout.on("data", (d) => (probeOutput += d));
  await new Promise((resolve) => setTimeout(resolve, 1_500)); // the probe's warm-up
  const started = performance.now();
  const durations = await Promise.all(
    Array.from({ length: calls }, async (_, c) => {
      const keys = Array.from({ length: 65_536 }, (_, i) => `${c}-${i}-`.padEnd(1_024, "k"));
      const big = createClient(MetadataService, createGrpcTransport({ baseUrl }));
      const t = performance.now();
      await big.batchAllocate({ rank: 0, keys });
      return performance.now() - t;
    }),
  );
  const total = performance.now() - started;
  probe.kill("SIGINT");
  await new Promise((resolve) => probe.once("exit", resolve));
  const result = { calls, bigCallMs: durations.map(Math.round), totalMs: Math.round(total), ...JSON.parse(probeOutput) };
  server.kill("SIGTERM");
  await new Promise((resolve) => server.once("exit", resolve));
  console.log(JSON.stringify({ ...result, ...JSON.parse(serverStderr.trim().split("\n").at(-1)!) }));
} finally {
  if (server.exitCode === null) server.kill("SIGTERM");
  rmSync(dir, { recursive: true, force: true });
}

/** probeSmallCalls calls BatchExists of one key in a loop until SIGINT, then prints the count and the worst latency. */
async function probeSmallCalls(baseUrl: string): Promise<never> {
  const small = createClient(MetadataService, createGrpcTransport({ baseUrl }));
  let worst = 0;
  let smallCalls = 0;
  let stop = false;
  process.once("SIGINT", () => (stop = true));
  while (!stop) {
    const started = performance.now();
    await small.batchExists({ keys: ["probe"] });
    if (smallCalls++ > 100) worst = Math.max(worst, performance.now() - started);
  }
  console.log(JSON.stringify({ smallCalls, smallWorstMs: Math.round(worst) }));
  process.exit(0);
}

async function connect(baseUrl: string) {
  const client = createClient(MetadataService, createGrpcTransport({ baseUrl }));
  await client.getStats({});
  return client;
}

async function waitFor<T>(attempt: () => Promise<T>): Promise<T> {
  for (let i = 0; ; i++) {
    try {
      return await attempt();
    } catch (error) {
      if (i > 100) throw error;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}
