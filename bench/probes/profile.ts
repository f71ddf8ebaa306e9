// profile.ts [--batch=B] [--concurrency=C] [--seconds=S] [--transport=T] [--durable] [--replay=M --live=N]: runs the cycle
// workload (lean gRPC client, or transport T of bench/harness/cycle-clients.ts) against an in-memory server started with
// --cpu-prof (or, with --replay=BatchExists|GetLocations, the floor workload's h2load replay of one B-key request
// against N live keys, 4 connections × 4 streams), then prints where the server's CPU went: self time per
// function, heaviest first, and by area. This is how the README's "where
// the time goes" figures are found. PROFILE_NODE_ARGS adds node flags to
// the server (to try V8 options). Run: node --import tsx bench/probes/profile.ts --batch=512
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { TRANSPORTS } from "../harness/cycle-clients.js";
import type { LoadResult } from "../harness/load.js";
import { nativeLoad } from "../harness/native-load.js";
import { choiceOption, numberOption, option } from "../harness/options.js";
import { cycleConfig, runLoad, SERVER, startProcess } from "../harness/processes.js";
import { fill, replayedRequests } from "./floor.js";

const batch = numberOption("batch", 512);
const concurrency = numberOption("concurrency", 16);
const seconds = numberOption("seconds", 5);

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string };
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

/** AREAS name where a function belongs, first match wins. Native functions (no script, ":0") are mostly node:http2's socket and buffer work. */
const AREAS: [string, RegExp][] = [
  ["gc", /^\(garbage collector\)/],
  ["v8 (program)", /^\(program\)/],
  ["core", / src\/core\//],
  ["json routes", / src\/service\/json\/|^parse :0$|^stringify :0$/],
  ["service", / src\/(service|server|store)\//],
  ["http/1.1", /node:_http_|node:internal\/http\b|^parserOn/],
  ["protobuf", /@bufbuild|node:internal\/encoding|decodeUTF8|encodeInto/],
  ["http2 and native", /node:internal\/http2|node:internal\/streams|node:events| :0$/],
  ["startup", /node:internal\/modules|tsx|esbuild|node:internal\/bootstrap/],
];

const dir = mkdtempSync(join(tmpdir(), "hf3fs-profile-"));
// --durable profiles the server on an LMDB data dir (the default mode) instead of --in-memory.
const store = process.argv.includes("--durable") ? ["--data-dir", join(dir, "data")] : ["--in-memory"];
const serve = ["serve", ...store, "--host", "127.0.0.1", "--port", "0", "--read-lease-ttl", "50ms"];
const extraNodeArgs = (process.env.PROFILE_NODE_ARGS ?? "").split(" ").filter(Boolean);
const server = await startProcess(SERVER, serve, ["--cpu-prof", `--cpu-prof-dir=${dir}`, ...extraNodeArgs]);
const replay = option("replay", "");
if (replay === "") {
  const config = cycleConfig(server.url, {
    transport: choiceOption("transport", TRANSPORTS, "lean-grpc"),
    batch,
    concurrency,
    connections: Math.min(concurrency, 2),
    warmupMs: 500,
    durationMs: seconds * 1_000,
  });
  const { result, serverCpuMs } = await runLoad<LoadResult>(config, server.pid);
  const calls = result.cycles * 4;
  console.log(
    `B=${batch} C=${concurrency}: ${result.cycles} cycles, server ${((serverCpuMs * 1_000) / calls).toFixed(1)} µs/call, ${((serverCpuMs * 1_000) / Math.max(1, result.keys)).toFixed(2)} µs/key`,
  );
} else {
  const liveKeys = numberOption("live", 200_000);
  await fill(server.url, { liveKeys });
  const { exists, locations } = replayedRequests(batch);
  const r = await nativeLoad(server.url, server.pid, replay, replay === "GetLocations" ? locations : exists, {
    connections: 4,
    streams: 4,
    durationSec: seconds,
  });
  console.log(`${replay} of ${batch} keys among ${liveKeys}: ${r.callsPerSec.toFixed(0)} calls/s, server ${r.serverCpuPerCallUs.toFixed(1)} µs/call`);
}
await server.stop();

// tsx's loader thread writes a profile too; the largest one is the server's main thread.
const [file] = readdirSync(dir)
  .filter((f) => f.endsWith(".cpuprofile"))
  .sort((a, b) => statSync(join(dir, b)).size - statSync(join(dir, a)).size);
if (file !== undefined) {
  const profile = JSON.parse(readFileSync(join(dir, file), "utf8")) as Profile;
  const self = new Map<string, number>();
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  let total = 0;
  profile.samples.forEach((id, i) => {
    const frame = byId.get(id)!.callFrame;
    // No line numbers: tsx's output puts a module on one line.
    const name = `${frame.functionName || "(anonymous)"} ${frame.url.replace(/^.*\/(node_modules|src|gen)\//, "$1/") || ":0"}`;
    const dt = profile.timeDeltas[i] ?? 0;
    self.set(name, (self.get(name) ?? 0) + dt);
    total += dt;
  });
  const idle = [...self].filter(([n]) => n.startsWith("(idle)")).reduce((s, [, t]) => s + t, 0);
  console.log(`${file}: ${(total / 1e3).toFixed(0)} ms sampled, ${((total - idle) / 1e3).toFixed(0)} ms busy`);
  const areas = new Map<string, number>();
  for (const [name, t] of self) {
    if (name.startsWith("(idle)")) continue;
    const area = AREAS.find(([, pattern]) => pattern.test(name))?.[0] ?? "other";
    areas.set(area, (areas.get(area) ?? 0) + t);
  }
  console.log(
    [...areas]
      .sort((a, b) => b[1] - a[1])
      .map(([a, t]) => `${a} ${((t / (total - idle)) * 100).toFixed(0)}%`)
      .join(", "),
  );
  for (const [name, t] of [...self]
    .filter(([n]) => !n.startsWith("(idle)"))
    .sort((a, b) => b[1] - a[1])
    .slice(0, 40)) {
    console.log(`${((t / (total - idle)) * 100).toFixed(1).padStart(5)}%  ${name}`);
  }
}
rmSync(dir, { recursive: true, force: true });
