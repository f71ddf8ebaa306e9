// standby-reads.ts [--seconds=S] [--rounds=R] [--batch=B] [--clients=C] [--rate=N]: what reads on standbys save
// the leader. 3 etcd members and 3 servers; a relay in front of them, started with `--reads members`
// (standbys answer the reads they hold fresh) and `--reads leader` (every read to the leader), the
// two alternated R times (2) on the same cluster. Each row runs C (4) loops of vLLM's pattern for S
// seconds (5): a worker's BatchAllocate and ConfirmWrite of B (128) new keys, then 3 BatchExists of
// the same keys (the scheduler asking for the waiting requests), all through the relay, paced at N
// (10) cycles a second in all, so that both rows do the same work when they keep up (`--modes=`
// also takes `idle`: no calls, the CPU per the N × S cycles of the other rows). It prints,
// per row, the cycles done and the CPU of the leader and of the standbys per cycle (from /proc). With
// `--pin=yes` (the default, on 2 cores or more) the leader runs alone on core 0 and every other process
// on core 1 (taskset).
// Run: node --import tsx bench/probes/standby-reads.ts
import { execFileSync } from "node:child_process";
import { availableParallelism } from "node:os";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { MetadataService } from "../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { running } from "../harness/etcd-process.js";
import { leaderOf, startHaCluster } from "../harness/ha.js";
import { numberOption, option } from "../harness/options.js";
import { cpuMs, SERVER, serverArgs, startProcess } from "../harness/processes.js";

const seconds = numberOption("seconds", 5);
const rounds = numberOption("rounds", 2);
const batch = numberOption("batch", 128);
const clients = numberOption("clients", 4);
const rate = numberOption("rate", 10);
const modes = option("modes", "members,leader").split(",") as ("members" | "leader" | "idle")[];
const profileDir = option("profile", "");
const pinned = option("pin", "yes") === "yes" && availableParallelism() >= 2;

// --profile=DIR writes each server's CPU profile there when it stops (node --cpu-prof).
const cluster = await startHaCluster(SERVER, serverArgs, 3, profileDir === "" ? [] : ["--cpu-prof", `--cpu-prof-dir=${profileDir}`]);
try {
  const leader = await leaderOf(cluster);
  const standbys = cluster.members.filter((m) => m !== leader);
  // The leader alone on core 0, every other process (etcd, standbys, relay, this load) on core 1: on 2 cores the standbys'
  // work competed with the leader's, and its CPU per cycle measured the contention more than its own work.
  if (pinned) {
    const others = [process.pid, ...standbys.map((m) => m.process.pid), ...[...running].map((child) => child.pid!)];
    execFileSync("taskset", ["-pc", "0", String(leader.process.pid)]);
    for (const pid of others) execFileSync("taskset", ["-pc", "1", String(pid)]);
  }
  const setup = createClient(MetadataService, createGrpcTransport({ baseUrl: leader.process.url }));
  await setup.initializeRank({ namespace: "bench", rank: 0, numPages: 1 << 22, worldSize: 1 });
  let next = 0;
  const rows: Record<string, { cycles: number; leaderMs: number; standbysMs: number }[]> = { members: [], leader: [], idle: [] };
  // Round 0 warms the leader up (its first seconds' CPU is the JIT's) and is not counted; then the order alternates (ABBA).
  for (let round = 0; round <= rounds; round++) {
    for (const reads of round % 2 === 1 ? modes : [...modes].reverse()) {
      // "idle": a relay (--reads members) and no calls, the CPU counted per the cycles the other rows do in as long (rate × seconds).
      const idle = reads === "idle";
      const relay = await startProcess(SERVER, [
        "relay",
        "--host",
        "127.0.0.1",
        "--port",
        "0",
        "--upstream",
        cluster.urls.join(","),
        "--reads",
        idle ? "members" : reads,
      ]);
      if (pinned) execFileSync("taskset", ["-pc", "1", String(relay.pid)]);
      try {
        await new Promise((resolve) => setTimeout(resolve, 1_500)); // its probes find the caught-up members
        const client = createClient(MetadataService, createGrpcTransport({ baseUrl: relay.url }));
        const before = { leader: cpuMs(leader.process.pid), standbys: standbys.reduce((sum, m) => sum + cpuMs(m.process.pid), 0) };
        const start = performance.now();
        const end = start + seconds * 1_000;
        let cycles = 0;
        let slot = 0;
        await Promise.all(
          Array.from({ length: clients }, async () => {
            while (performance.now() < end && !idle) {
              // Paced: both rows do the same cycles when they keep up, so the CPU per cycle compares the same work.
              const due = start + (slot++ * 1_000) / rate;
              if (due > performance.now()) await new Promise((resolve) => setTimeout(resolve, due - performance.now()));
              if (performance.now() >= end) break;
              const keys = Array.from({ length: batch }, () => `key-${next++}`);
              const { pages } = await client.batchAllocate({ namespace: "bench", rank: 0, keys });
              await client.confirmWrite({ namespace: "bench", rank: 0, keys, pages });
              for (let i = 0; i < 3; i++) await client.batchExists({ namespace: "bench", keys });
              cycles++;
            }
          }),
        );
        if (idle) {
          await new Promise((resolve) => setTimeout(resolve, end - performance.now()));
          cycles = rate * seconds;
        }
        const leaderMs = cpuMs(leader.process.pid) - before.leader;
        const standbysMs = standbys.reduce((sum, m) => sum + cpuMs(m.process.pid), 0) - before.standbys;
        if (round > 0) rows[reads]!.push({ cycles, leaderMs, standbysMs });
        const counts = await Promise.all(standbys.map((m) => standbyCounts(m.process.url)));
        console.log(
          `round ${round} --reads ${reads}: ${cycles} cycles; leader ${((leaderMs * 1_000) / cycles).toFixed(0)} µs/cycle, standbys ${((standbysMs * 1_000) / cycles).toFixed(0)} µs/cycle; the standbys' reads so far: ${counts.join("; ")}`,
        );
      } finally {
        await relay.stop();
      }
    }
  }
  const perCycle = (list: { cycles: number; leaderMs: number }[]) => list.reduce((s, r) => s + r.leaderMs, 0) / list.reduce((s, r) => s + r.cycles, 0);
  if (rows.members!.length > 0 && rows.leader!.length > 0)
    console.log(`the leader's CPU per cycle, members against leader: ${(perCycle(rows.members!) / perCycle(rows.leader!)).toFixed(2)}×`);
  if (rows.idle!.length > 0) console.log(`the leader's CPU idle, per the cycles of a row: ${(perCycle(rows.idle!) * 1_000).toFixed(0)} µs`);
} finally {
  await cluster.stop();
}

/** standbyCounts reads a standby's reads by outcome from its /metrics. */
async function standbyCounts(url: string): Promise<string> {
  const text = await (await fetch(`${url}/metrics`)).text();
  return [...text.matchAll(/^hf3fs_metadata_standby_reads_total\{outcome="(\w+)"\} (\d+)$/gm)].map(([, outcome, n]) => `${outcome} ${n}`).join(", ");
}
