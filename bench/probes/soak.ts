/**
 * soak: `--minutes` (default 10) of mixed load against `serve` on a
 * temporary data dir: `--workers` (default 8) client processes
 * (bench/harness/soak-worker.ts, one rank each, calls with short deadlines among
 * them), one of them killed (SIGKILL) and replaced every 5 s. Every 10 s it
 * samples the server's RSS (/proc) and used heap (/metrics). At the end it
 * stops the server, loads its data dir into a fresh state and checks the
 * page invariants; prints the samples and a summary as JSON, and writes
 * them to bench/results/soak-*.json. Not in CI.
 * Run: node --import tsx bench/probes/soak.ts [--minutes 10] [--workers 8]
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { MetadataState } from "../../src/core/state.js";
import { LmdbStore } from "../../src/store/lmdb-store.js";
import { assertInvariants } from "../harness/invariants.js";
import { startProcess } from "../harness/processes.js";

const { values } = parseArgs({ options: { minutes: { type: "string", default: "10" }, workers: { type: "string", default: "8" } } });
const durationMs = Number(values.minutes) * 60_000;
const ROOT = new URL("../..", import.meta.url).pathname;
const dir = mkdtempSync(join(tmpdir(), "hf3fs-soak-"));
const server = await startProcess("src/cli/bin.mjs", ["serve", "--data-dir", dir, "--port", "0", "--overload-lag", "200ms"]);

const workers = new Map<number, ChildProcess>();
const totals: Record<string, number> = {};
let killed = 0;
function startWorker(rank: number): void {
  const child = spawn(process.execPath, ["--import", "tsx", `${ROOT}bench/harness/soak-worker.ts`, server.url, String(rank)], {
    cwd: ROOT,
    stdio: ["ignore", "pipe", "inherit"],
  });
  let last: Record<string, number> = {};
  child.stdout!.on("data", (d: Buffer) => {
    const line = d.toString().trim().split("\n").at(-1);
    if (line) last = JSON.parse(line) as Record<string, number>;
  });
  child.once("exit", () => {
    for (const [k, v] of Object.entries(last)) totals[k] = (totals[k] ?? 0) + v;
  });
  workers.set(rank, child);
}
const workerCount = Number(values.workers);
for (let r = 0; r < workerCount; r++) startWorker(r);

const rssMb = () => Math.round((Number(readFileSync(`/proc/${server.pid}/statm`, "utf8").split(" ")[1]) * 4096) / 2 ** 20);
async function heapMb(): Promise<number> {
  const text = await (await fetch(`${server.url}/metrics`)).text();
  return Math.round(Number(/^nodejs_heap_size_used_bytes (\S+)$/m.exec(text)?.[1] ?? Number.NaN) / 2 ** 20);
}

const samples: { atS: number; rssMb: number; heapMb: number }[] = [];
const started = Date.now();
const killer = setInterval(() => {
  const rank = Math.floor(Math.random() * workerCount);
  workers.get(rank)?.kill("SIGKILL");
  killed++;
  startWorker(rank);
}, 5_000);
while (Date.now() - started < durationMs) {
  await new Promise((resolve) => setTimeout(resolve, 10_000));
  samples.push({ atS: Math.round((Date.now() - started) / 1_000), rssMb: rssMb(), heapMb: await heapMb() });
  console.error(JSON.stringify(samples.at(-1)));
}
clearInterval(killer);
for (const child of workers.values()) child.kill("SIGKILL");
await new Promise((resolve) => setTimeout(resolve, 500));
await server.stop();

const store = await LmdbStore.open(dir);
const state = new MetadataState(Date.now, { maxRanksPerNamespace: 4_096 });
state.restore(store.stored());
assertInvariants(state);
const stats = state.stats("soak")[0];
await store.close();
rmSync(dir, { recursive: true, force: true });

const afterWarmup = samples.filter((s) => s.atS >= 120);
const range = (key: "rssMb" | "heapMb") => [Math.min(...afterWarmup.map((s) => s[key])), Math.max(...afterWarmup.map((s) => s[key]))];
const result = {
  date: new Date().toISOString(),
  minutes: Number(values.minutes),
  workers: workerCount,
  workersKilled: killed,
  calls: totals,
  afterWarmup: { rssMb: range("rssMb"), heapMb: range("heapMb") },
  invariants: "hold",
  keys: stats?.keys,
  samples,
};
mkdirSync(join(ROOT, "bench/results"), { recursive: true });
writeFileSync(join(ROOT, `bench/results/soak-${result.date.replaceAll(":", "-")}.json`), JSON.stringify(result, null, 2));
console.log(JSON.stringify({ ...result, samples: undefined }));
