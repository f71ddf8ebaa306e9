import { type ChildProcess, spawn } from "node:child_process";
import { createWriteStream, existsSync, readFileSync } from "node:fs";
import { createInterface } from "node:readline";
import type { LoadConfig } from "./load.js";

const ROOT = new URL("../..", import.meta.url).pathname;
const CLOCK_TICKS_PER_SECOND = 100;

/** SERVER is the server's entry point (run from dist/: see entryArgs). */
export const SERVER = "src/cli/main.ts";

/** serverArgs are the benchmarks' common serve flags (loopback, an ephemeral port, short read leases), then `extra`. */
export const serverArgs = (extra: string[]) => ["serve", "--host", "127.0.0.1", "--port", "0", "--read-lease-ttl", "50ms", ...extra];

/** ServerProcess is a server started for a benchmark. */
export interface ServerProcess {
  url: string;
  pid: number;
  stop(): Promise<void>;
  /** logged resolves with the first log line (its fields) whose msg is `msg`, once the server logged it. */
  logged(msg: string): Promise<Record<string, unknown>>;
}

/**
 * entryArgs is how node runs an entry point: a checkout's CLI (its
 * src/cli/main.ts) through its bin.mjs, which runs the compiled build as
 * users do (and the sources through tsx, saying so, when dist/ is stale:
 * tsx's output costs 10-20% more server CPU per call, bench/README.md); any
 * other file through tsx.
 */
function entryArgs(entry: string): string[] {
  const bin = entry.replace(/src\/cli\/main\.ts$/, "src/cli/bin.mjs");
  if (bin !== entry && existsSync(`${ROOT}${bin}`)) return [...shebangFlags(`${ROOT}${entry}`), `${ROOT}${bin}`];
  return ["--import", "tsx", `${ROOT}${entry}`];
}

/**
 * shebangFlags are the node flags a checkout's CLI starts with as installed: those its
 * main.ts's first line gives `node` (`#!/usr/bin/env -S node FLAGS`), so that each
 * checkout of an A/B runs as it is deployed; BENCH_NODE_FLAGS=none leaves them out.
 */
export function shebangFlags(main: string): string[] {
  if (process.env.BENCH_NODE_FLAGS === "none") return [];
  const line = readFileSync(main, "utf8").split("\n", 1)[0]!;
  const flags = /^#!\/usr\/bin\/env -S node (.*)$/.exec(line)?.[1];
  return flags === undefined ? [] : flags.trim().split(/\s+/);
}

/** startProcess runs a node entry point (with nodeArgs; see entryArgs) that logs a "listening" JSON line with its url. */
export async function startProcess(entry: string, args: string[], nodeArgs: string[] = []): Promise<ServerProcess> {
  const child = spawn(process.execPath, [...nodeArgs, ...entryArgs(entry), ...args], { cwd: ROOT, stdio: ["ignore", "pipe", "inherit"] });
  const events: Record<string, unknown>[] = [];
  const waiting: { msg: string; resolve: (event: Record<string, unknown>) => void }[] = [];
  const url = await new Promise<string>((resolve, reject) => {
    // BENCH_SERVER_LOGS=DIR keeps each server's log lines in DIR/PID.log, each after the time it was read (ms since the epoch).
    const logs = process.env.BENCH_SERVER_LOGS ? createWriteStream(`${process.env.BENCH_SERVER_LOGS}/${child.pid}.log`) : undefined;
    createInterface({ input: child.stdout! }).on("line", (line) => {
      logs?.write(`${Date.now()} ${line}\n`);
      try {
        const event = JSON.parse(line) as { msg?: string; url?: string };
        if (event.msg === "listening") resolve(event.url!);
        events.push(event);
        for (const w of waiting.filter((w) => w.msg === event.msg)) w.resolve(event);
      } catch {
        // not a log line
      }
    });
    child.once("exit", (code) => reject(new Error(`${entry} exited with ${code} before listening`)));
  });
  const logged = (msg: string) =>
    new Promise<Record<string, unknown>>((resolve) => {
      const seen = events.find((e) => e.msg === msg);
      if (seen !== undefined) resolve(seen);
      else waiting.push({ msg, resolve });
    });
  return { url, pid: child.pid!, stop: () => stopChild(child), logged };
}

/** ShardedProcesses are S servers, one per shard, and a relay in front of them. */
export interface ShardedProcesses {
  servers: ServerProcess[];
  relay: ServerProcess;
  stop(): Promise<void>;
}

/** startShards runs `count` servers of `entry` with serve's `serve` args (and --shards, --shard past one), and a relay of `entry` in front of them. */
export async function startShards(entry: string, serve: string[], count: number): Promise<ShardedProcesses> {
  const servers = await Promise.all(
    Array.from({ length: count }, (_, shard) => startProcess(entry, count > 1 ? [...serve, "--shards", String(count), "--shard", String(shard)] : serve)),
  );
  const relay = await startProcess(entry, ["relay", "--host", "127.0.0.1", "--port", "0", "--upstream", servers.map((s) => s.url).join(";")]);
  return { servers, relay, stop: async () => void (await Promise.all([relay, ...servers].map((p) => p.stop()))) };
}

async function stopChild(child: ChildProcess): Promise<void> {
  // A child killed by a signal (a probe's kill -9) has no exit code, only its signal: it is gone, and its exit was told already.
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once("exit", resolve));
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
  await exited;
  clearTimeout(timer);
}

/** cpuMs reads a process's user + system CPU time from /proc, in milliseconds. */
export function cpuMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  // fields[11] and [12] are utime and stime (fields 14 and 15 of proc(5)).
  return ((Number(fields[11]) + Number(fields[12])) * 1_000) / CLOCK_TICKS_PER_SECOND;
}

/** rssMb reads a process's resident set size from /proc, in MiB. */
export function rssMb(pid: number): number {
  const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return Number(match?.[1] ?? 0) / 1024;
}

/** runLoad runs the load process and samples the server's CPU (and that of `otherPids`, e.g. a relay) over its measured window. */
export async function runLoad<R>(
  config: object,
  serverPid: number,
  otherPids: readonly number[] = [],
): Promise<{ result: R; serverCpuMs: number; serverRssMb: number; otherCpuMs: number[] }> {
  const child = spawn(process.execPath, ["--import", "tsx", `${ROOT}bench/harness/load.ts`, JSON.stringify(config)], {
    cwd: ROOT,
    stdio: ["ignore", "pipe", "inherit"],
  });
  let cpuStart = 0;
  let otherStart: number[] = [];
  let otherCpuMs: number[] = [];
  let serverCpuMs = 0;
  let serverRssMb = 0;
  let result: R | undefined;
  createInterface({ input: child.stdout! }).on("line", (line) => {
    if (line === "start") {
      cpuStart = cpuMs(serverPid);
      otherStart = otherPids.map(cpuMs);
    } else if (line === "end") {
      serverCpuMs = cpuMs(serverPid) - cpuStart;
      otherCpuMs = otherPids.map((pid, i) => cpuMs(pid) - otherStart[i]!);
      serverRssMb = rssMb(serverPid);
    } else result = JSON.parse(line) as R;
  });
  const code = await new Promise<number | null>((resolve) => child.once("exit", resolve));
  if (code !== 0 || result === undefined) throw new Error(`load process exited with ${code}`);
  return { result, serverCpuMs, serverRssMb, otherCpuMs };
}

/**
 * cycleConfig is the cycle workload's load on one server as the probes run it (bench/probes/profile.ts,
 * bench/ab.ts): 8 ranks of 100,000 pages, 2 connections, the lean client, unless `changes` says otherwise.
 */
export function cycleConfig(url: string, changes: Partial<LoadConfig>): LoadConfig {
  return {
    url,
    transport: "lean-grpc",
    batch: 512,
    concurrency: 16,
    connections: 2,
    ranks: 8,
    numPages: 100_000,
    warmupMs: 700,
    durationMs: 2_000,
    keyOffset: 0,
    ...changes,
  };
}
