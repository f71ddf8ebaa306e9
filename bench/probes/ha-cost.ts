// ha-cost.ts [--members=N] [--seconds=S] [--settle=S] [--concurrency=C] [--rate=K] [--profile=DIR]: where HA's throughput goes. The cycle at
// B=64, C (16; fewer calls in flight, a lower rate: a server's CPU per key rises as its rate falls) (lean gRPC client, 8 ranks of 100,000 pages) for S seconds (15) after 2 s of warm-up, on
// N servers (3) on 3 etcd members, or with --members=0 on the single-node default (LMDB; with --store=memory, in
// memory, the yardstick for an HA leader's cost); prints
// keys/s, call latency, each process's CPU (% of a core; the leader's also per key), the machine's user/sys/idle and the bytes
// each process wrote to disk. --members=1 is the leader alone on etcd: the most HA can reach with
// standbys that cost nothing. --settle waits S seconds (0) between electing a leader and the load: a leader stops copying to its
// store a few seconds into its term, once it saw its standbys keep pace (LocalCopy). --profile writes the servers' .cpuprofile files to DIR.
// Run: node --import tsx bench/probes/ha-cost.ts --members=1
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { leaderOf, startHaCluster } from "../harness/ha.js";
import type { LoadResult } from "../harness/load.js";
import { option } from "../harness/options.js";
import { cpuMs, cycleConfig, runLoad, SERVER, serverArgs, startProcess } from "../harness/processes.js";

const members = Number(option("members", "3"));
const seconds = Number(option("seconds", "15"));
const settle = Number(option("settle", "0"));
const profile = option("profile", "");
const store = option("store", "lmdb");
const concurrency = Number(option("concurrency", "16"));
/** rate paces the load to this many keys a second in all (0: as fast as it goes), so that an HA leader and a single node compare at one rate. */
const rate = Number(option("rate", "0"));
const nodeArgs = profile === "" ? [] : ["--cpu-prof", `--cpu-prof-dir=${profile}`];

/** written reads the bytes a process has written to disk so far (/proc/PID/io). */
const written = (pid: number) => Number(/write_bytes: (\d+)/.exec(readFileSync(`/proc/${pid}/io`, "utf8"))?.[1] ?? 0);
/** machine reads the machine's CPU time so far, in clock ticks: [user, nice, system, idle, ...] (/proc/stat). */
const machine = () => readFileSync("/proc/stat", "utf8").split("\n")[0]!.trim().split(/\s+/).slice(1).map(Number);

/** Process is one process whose CPU and writes the run reports. */
interface Process {
  name: string;
  pid: number;
}

async function measure(url: string, leaderPid: number, processes: Process[]): Promise<string> {
  const cpu0 = processes.map((p) => cpuMs(p.pid));
  const io0 = processes.map((p) => written(p.pid));
  const machine0 = machine();
  const started = performance.now();
  const { result } = await runLoad<LoadResult>(
    cycleConfig(url, {
      batch: 64,
      concurrency,
      ...(rate > 0 ? { cyclesPerSecond: rate / 64 } : {}),
      warmupMs: 2_000,
      durationMs: seconds * 1_000,
      keyOffset: 1e9,
    }),
    leaderPid,
  );
  const elapsed = performance.now() - started;
  const ticks = machine().map((t, i) => t - machine0[i]!);
  const total = ticks.reduce((a, b) => a + b, 0);
  const pct = (i: number) => Math.round((ticks[i]! / total) * 100);
  const rows = processes.map(
    (p, i) => `${p.name} ${Math.round(((cpuMs(p.pid) - cpu0[i]!) / elapsed) * 100)}% ${((written(p.pid) - io0[i]!) / (elapsed / 1_000) / 1e6).toFixed(1)} MB/s`,
  );
  const leaderUsPerKey = ((cpuMs(processes[0]!.pid) - cpu0[0]!) * 1_000) / Math.max(1, result.keys);
  const rpc = Object.values(result.rpc);
  return [
    `${Math.round((result.keys / result.elapsedMs) * 1_000)} keys/s, call p99 ${Math.max(...rpc.map((r) => r.p99)).toFixed(0)} ms, ${processes[0]!.name} ${leaderUsPerKey.toFixed(1)} µs/key`,
    `client ${Math.round((result.clientCpuMs / result.elapsedMs) * 100)}%`,
    ...rows,
    `machine user ${pct(0)}% sys ${pct(2)}% idle ${pct(3)}%`,
  ].join("; ");
}

if (members === 0) {
  const dir = mkdtempSync(join(tmpdir(), "hf3fs-metadata-bench-single-"));
  const server = await startProcess(SERVER, serverArgs(store === "memory" ? ["--in-memory"] : ["--data-dir", dir]), nodeArgs);
  try {
    console.log(`single-node (${store}): ${await measure(server.url, server.pid, [{ name: "server", pid: server.pid }])}`);
  } finally {
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  }
} else {
  const cluster = await startHaCluster(SERVER, serverArgs, members, nodeArgs);
  try {
    const leader = await leaderOf(cluster);
    await new Promise((r) => setTimeout(r, settle * 1_000));
    const processes = [
      { name: "leader", pid: leader.process.pid },
      ...cluster.members.filter((m) => m !== leader).map((m, i) => ({ name: `standby${i + 1}`, pid: m.process.pid })),
      ...cluster.etcd.members.map((m, i) => ({ name: `etcd${i + 1}`, pid: m.process!.pid! })),
    ];
    console.log(`${members} member(s): ${await measure(leader.process.url, leader.process.pid, processes)}`);
  } finally {
    await cluster.stop();
  }
}
