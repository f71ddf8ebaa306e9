import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { shebangFlags } from "../harness/processes.js";
import { fillStore } from "./recovery.js";

const ROOT = new URL("../..", import.meta.url).pathname;
const BIN = join(ROOT, "src/cli/bin.mjs");

/** StartTimes are the milliseconds from spawning `hf3fs-metadata serve` to its "listening" line and to its "ready" line (its store loaded). */
export interface StartTimes {
  listeningMs: number;
  readyMs: number;
}

/** startOnce starts the CLI as a supervisor would (`node FLAGS src/cli/bin.mjs serve`, the compiled build with the installed command's node flags) and times it; then kills it. */
async function startOnce(args: string[]): Promise<StartTimes> {
  const started = performance.now();
  const child = spawn(process.execPath, [...shebangFlags(join(ROOT, "src/cli/main.ts")), BIN, "serve", "--port", "0", "--log-level", "info", ...args], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  child.stderr.on("data", (d) => (stderr += d));
  const times: Partial<StartTimes> = {};
  await new Promise<void>((resolve, reject) => {
    createInterface({ input: child.stdout }).on("line", (line) => {
      const msg = (JSON.parse(line) as { msg?: string }).msg;
      if (msg === "listening") times.listeningMs = performance.now() - started;
      if (msg === "ready") {
        times.readyMs = performance.now() - started;
        resolve();
      }
    });
    child.once("exit", (code) => reject(new Error(`the server exited with ${code}: ${stderr}`)));
  });
  if (stderr.includes("tsx")) throw new Error(`the server ran its sources through tsx, not the build: ${stderr}`);
  const exited = new Promise((resolve) => child.once("exit", resolve));
  child.kill("SIGKILL");
  await exited;
  return times as StartTimes;
}

/** median of a non-empty list. */
function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

/**
 * measureStartup builds dist/ (what npm ci makes) and times `runs` starts
 * of: an in-memory server, one on an empty data dir, and one on a store of
 * `keys` complete keys on `ranks` ranks; it reports each case's median and
 * worst.
 */
export async function measureStartup(keys: number, ranks: number, runs: number): Promise<Record<string, { listeningMs: number[]; readyMs: number[] }>> {
  execFileSync("npm", ["run", "--silent", "build"], { cwd: ROOT, stdio: "inherit" });
  const empty = mkdtempSync(join(tmpdir(), "hf3fs-metadata-bench-startup-"));
  const full = mkdtempSync(join(tmpdir(), "hf3fs-metadata-bench-startup-"));
  await fillStore(full, keys, ranks);
  const cases: [string, string[]][] = [
    ["in-memory", ["--in-memory"]],
    ["empty store", ["--data-dir", empty]],
    [`${keys} keys on ${ranks} ranks`, ["--data-dir", full]],
  ];
  const results: Record<string, { listeningMs: number[]; readyMs: number[] }> = {};
  try {
    for (const [name, args] of cases) {
      const times: StartTimes[] = [];
      for (let i = 0; i < runs; i++) times.push(await startOnce(args));
      results[name] = { listeningMs: times.map((t) => Math.round(t.listeningMs)), readyMs: times.map((t) => Math.round(t.readyMs)) };
      const r = results[name]!;
      console.log(
        `startup   ${name}: start to listening ${median(r.listeningMs)} ms (max ${Math.max(...r.listeningMs)}), to serving ${median(r.readyMs)} ms (max ${Math.max(...r.readyMs)}), ${runs} runs`,
      );
    }
  } finally {
    rmSync(empty, { recursive: true, force: true });
    rmSync(full, { recursive: true, force: true });
  }
  return results;
}
