// standby-reads.ts [--seconds=S] [--rounds=R] [--batch=B] [--clients=C] [--rate=N]: what reads on standbys save
// the leader. 3 etcd members and 3 servers; a relay in front of them, started with `--reads members`
// (standbys answer the reads they hold fresh) and `--reads leader` (every read to the leader), the
// two alternated R times (2) on the same cluster, after a round 0 of each that runs unpaced and is not
// counted (the JIT's warm-up). Each row runs C (4) loops of vLLM's pattern for S
// seconds (5): a worker's BatchAllocate and ConfirmWrite of B (128) new keys, then 3 BatchExists of
// the same keys (the scheduler asking for the waiting requests), all through the relay, paced at N
// (10) cycles a second in all, so that both rows do the same work when they keep up (`--modes=`
// also takes `idle`: no calls, the CPU per the N × S cycles of the other rows). It prints,
// per row, the cycles done and the CPU of the leader and of the standbys per cycle (from /proc). With
// `--pin=yes` (the default, on 2 cores or more) the leader runs alone on core 0 and every other process
// on core 1 (taskset).
// Run: node --import tsx bench/probes/standby-reads.ts, or `npm run bench -- --only=standby-reads` (at 10 and 25 cycles a
// second; --quick: 25 only, one round of 2 s rows).
import { availableParallelism } from "node:os";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { MetadataService } from "../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { affinityMask, pinToCore, setAffinityMask } from "../harness/cpu-affinity.js";
import { leaderOf, startHaCluster } from "../harness/ha.js";
import { numberOption, option } from "../harness/options.js";
import { cpuMs, SERVER, serverArgs, startProcess } from "../harness/processes.js";
import { standbyCounts } from "../harness/standby-counts.js";

/** ReadsMode is where the relay sends reads (its `--reads`), or "idle": a relay and no calls. */
export type ReadsMode = "members" | "leader" | "idle";

/** StandbyReadsOptions are the probe's knobs (its flags, above). */
export interface StandbyReadsOptions {
  seconds: number;
  rounds: number;
  batch: number;
  clients: number;
  /** rate is the cycles a second of all the loops together. */
  rate: number;
  modes: readonly ReadsMode[];
  /** profileDir, unless "", gets each server's CPU profile when it stops (node --cpu-prof). */
  profileDir: string;
  /** pin puts the leader alone on core 0 and every other process on core 1 (taskset), on a machine of 2 cores or more. */
  pin: boolean;
}

/** StandbyReadsRow is one measured row: `cycles` done and the CPU the leader and the standbys spent meanwhile. */
export interface StandbyReadsRow {
  round: number;
  mode: ReadsMode;
  cycles: number;
  leaderMs: number;
  standbysMs: number;
}

/** StandbyReadsResult is every row, the counted rounds' ratio of the leader's CPU per cycle (members over leader) and its idle CPU per cycle. */
export interface StandbyReadsResult {
  rate: number;
  rows: StandbyReadsRow[];
  /** leaderRatio is the leader's CPU per cycle with the standbys answering reads over with every read on it; NaN unless both ran. */
  leaderRatio: number;
  /** idleUsPerCycle is the leader's CPU with no calls, per the cycles the other rows do in as long; NaN unless idle ran. */
  idleUsPerCycle: number;
  /** atPace is how many of the `counted` rows (round 0 is not) did at least 95% of the cycles their pace asked: a row short of it ran slower, and its CPU per cycle is not the same work's. */
  atPace: number;
  counted: number;
}

/** measureStandbyReads starts the cluster, runs the rows and stops it; `log` gets a line per row. */
export async function measureStandbyReads(o: StandbyReadsOptions, log: (line: string) => void = console.log): Promise<StandbyReadsResult> {
  const cluster = await startHaCluster(SERVER, serverArgs, 3, o.profileDir === "" ? [] : ["--cpu-prof", `--cpu-prof-dir=${o.profileDir}`]);
  const rows: StandbyReadsRow[] = [];
  const pinned = o.pin && availableParallelism() >= 2;
  const dueCycles = o.rate * o.seconds;
  // This process is pinned with the others below; its own mask comes back at the end, or every bench after this one (and
  // every process it starts) would run on one core.
  const ownMask = pinned ? affinityMask(process.pid) : "";
  try {
    const leader = await leaderOf(cluster);
    const standbys = cluster.members.filter((m) => m !== leader);
    // The leader alone on core 0, every other process (etcd, standbys, relay, this load) on core 1: on 2 cores the standbys'
    // work competed with the leader's, and its CPU per cycle measured the contention more than its own work.
    if (pinned) {
      const etcd = cluster.etcd.members.flatMap((m) => (m.process?.pid === undefined ? [] : [m.process.pid]));
      const others = [process.pid, ...standbys.map((m) => m.process.pid), ...etcd];
      pinToCore(leader.process.pid, 0);
      for (const pid of others) pinToCore(pid, 1);
    }
    const setup = createClient(MetadataService, createGrpcTransport({ baseUrl: leader.process.url }));
    await setup.initializeRank({ namespace: "bench", rank: 0, numPages: 1 << 22, worldSize: 1 });
    let next = 0;
    // Round 0 warms the leader up (its first seconds' CPU is the JIT's), unpaced, and is not counted; then the order alternates (ABBA).
    for (let round = 0; round <= o.rounds; round++) {
      for (const mode of round % 2 === 1 ? o.modes : [...o.modes].reverse()) {
        // "idle": a relay (--reads members) and no calls, the CPU counted per the cycles the other rows do in as long (rate × seconds).
        const idle = mode === "idle";
        const relay = await startProcess(SERVER, [
          "relay",
          "--host",
          "127.0.0.1",
          "--port",
          "0",
          "--upstream",
          cluster.urls.join(","),
          "--reads",
          idle ? "members" : mode,
        ]);
        if (pinned) pinToCore(relay.pid, 1);
        try {
          await new Promise((resolve) => setTimeout(resolve, 1_500)); // its probes find the caught-up members
          const client = createClient(MetadataService, createGrpcTransport({ baseUrl: relay.url }));
          const before = { leader: cpuMs(leader.process.pid), standbys: standbys.reduce((sum, m) => sum + cpuMs(m.process.pid), 0) };
          const start = performance.now();
          const end = start + o.seconds * 1_000;
          let cycles = 0;
          let slot = 0;
          // Round 0 runs as fast as it can: at the pace, the leader's code for either row was still being compiled a minute in.
          const paced = round > 0;
          await Promise.all(
            Array.from({ length: o.clients }, async () => {
              while (performance.now() < end && !idle) {
                // Paced: both rows do the same cycles when they keep up, so the CPU per cycle compares the same work.
                const at = start + (slot++ * 1_000) / o.rate;
                if (paced && at > performance.now()) await new Promise((resolve) => setTimeout(resolve, at - performance.now()));
                if (performance.now() >= end) break;
                const keys = Array.from({ length: o.batch }, () => `key-${next++}`);
                const { pages } = await client.batchAllocate({ namespace: "bench", rank: 0, keys });
                await client.confirmWrite({ namespace: "bench", rank: 0, keys, pages });
                for (let i = 0; i < 3; i++) await client.batchExists({ namespace: "bench", keys });
                cycles++;
              }
            }),
          );
          if (idle) {
            await new Promise((resolve) => setTimeout(resolve, end - performance.now()));
            cycles = dueCycles;
          }
          const leaderMs = cpuMs(leader.process.pid) - before.leader;
          const standbysMs = standbys.reduce((sum, m) => sum + cpuMs(m.process.pid), 0) - before.standbys;
          rows.push({ round, mode, cycles, leaderMs, standbysMs });
          const counts = (await Promise.all(standbys.map((m) => standbyCounts(m.process.url)))).map(
            (c) => `local ${c.local}, lagging ${c.lagging}, behind ${c.behind}`,
          );
          log(
            `round ${round} --reads ${mode}: ${cycles} cycles ${paced ? `of ${dueCycles}` : "unpaced (warm-up)"}; leader ${((leaderMs * 1_000) / cycles).toFixed(0)} µs/cycle, standbys ${((standbysMs * 1_000) / cycles).toFixed(0)} µs/cycle; the standbys' reads so far: ${counts.join("; ")}`,
          );
        } finally {
          await relay.stop();
        }
      }
    }
  } finally {
    if (pinned) setAffinityMask(process.pid, ownMask);
    await cluster.stop();
  }
  // The ratio of sums over the counted rounds (round 0 is the warm-up).
  const counted = rows.filter((r) => r.round > 0);
  const perCycleUs = (mode: ReadsMode) => {
    const of = counted.filter((r) => r.mode === mode);
    return (of.reduce((s, r) => s + r.leaderMs, 0) * 1_000) / of.reduce((s, r) => s + r.cycles, 0);
  };
  return {
    rate: o.rate,
    rows,
    leaderRatio: perCycleUs("members") / perCycleUs("leader"),
    idleUsPerCycle: perCycleUs("idle"),
    atPace: counted.filter((r) => r.cycles >= 0.95 * dueCycles).length,
    counted: counted.length,
  };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const result = await measureStandbyReads({
    seconds: numberOption("seconds", 5),
    rounds: numberOption("rounds", 2),
    batch: numberOption("batch", 128),
    clients: numberOption("clients", 4),
    rate: numberOption("rate", 10),
    modes: option("modes", "members,leader").split(",") as ReadsMode[],
    profileDir: option("profile", ""),
    pin: option("pin", "yes") === "yes",
  });
  if (!Number.isNaN(result.leaderRatio))
    console.log(
      `the leader's CPU per cycle, members against leader: ${result.leaderRatio.toFixed(2)}× (${result.atPace} of ${result.counted} rows kept the pace)`,
    );
  if (!Number.isNaN(result.idleUsPerCycle)) console.log(`the leader's CPU idle, per the cycles of a row: ${result.idleUsPerCycle.toFixed(0)} µs`);
}
