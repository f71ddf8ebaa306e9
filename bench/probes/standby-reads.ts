// standby-reads.ts [--seconds=S] [--rounds=R] [--batch=B] [--read-keys=K] [--clients=C] [--rate=N]
// [--pattern=P]: what reads on standbys save the leader. 3 etcd members and 3 servers; a relay in front of
// them, started with `--reads members` (standbys answer the reads they hold fresh) and `--reads leader`
// (every read to the leader), the two alternated R times (2) on the same cluster, after a round 0 of each
// that runs unpaced and is not counted (the JIT's warm-up). Each row runs vLLM's mix for S seconds (5),
// through the relay, paced at N (10) cycles a second in all, so that both rows do the same work when they
// keep up: a cycle is a worker's BatchAllocate and ConfirmWrite of B (128) new keys and 3 BatchExists of K
// keys. `--pattern=engine` (the default, and the benchmark's) asks as vLLM's processes do: C (4) workers on
// connections of their own write, and a scheduler on its own asks the reads at its own pace, each of the K
// (B) keys written last. `--pattern=loop`: C loops on one connection, each cycle's reads (of the loop's K
// keys written last) right after its writes. `--modes=` also takes `idle`: no calls, the CPU per the N × S
// cycles of the other rows. It prints, per row, the cycles and reads done and the CPU of the leader and of
// the standbys per cycle (from /proc). With `--pin=yes` (the default, on 2 cores or more) the leader runs
// alone on core 0 and every other process on core 1 (taskset). Run: node --import tsx
// bench/probes/standby-reads.ts, or `npm run bench -- --only=standby-reads` (at 10 and 25 cycles a second;
// --quick: 25 only, one round of 2 s rows).
import { availableParallelism } from "node:os";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { MetadataService } from "../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { affinityMask, pinToCore, setAffinityMask } from "../harness/cpu-affinity.js";
import { leaderOf, startHaCluster } from "../harness/ha.js";
import { choiceOption, choicesOption, numberOption, option } from "../harness/options.js";
import { cpuMs, SERVER, serverArgs, startProcess } from "../harness/processes.js";
import { standbyCounts } from "../harness/standby-counts.js";

/** READS_MODES are where the relay sends reads (its `--reads`), and "idle": a relay and no calls. */
export const READS_MODES = ["members", "leader", "idle"] as const;

/** ReadsMode is one of READS_MODES. */
export type ReadsMode = (typeof READS_MODES)[number];

/** READS_PER_CYCLE is the BatchExists of the scheduler's mix per allocate-confirm cycle (#43's measure). */
const READS_PER_CYCLE = 3;

/** LOAD_PATTERNS are who asks for what, and when (StandbyReadsOptions.pattern). */
export const LOAD_PATTERNS = ["engine", "loop"] as const;

/** LoadPattern is one of LOAD_PATTERNS. */
export type LoadPattern = (typeof LOAD_PATTERNS)[number];

/** StandbyReadsOptions are the probe's knobs (its flags, above). */
export interface StandbyReadsOptions {
  seconds: number;
  rounds: number;
  batch: number;
  /** readKeys is the keys of each read: the last written (vLLM's scheduler asks of a whole prompt's blocks). */
  readKeys: number;
  clients: number;
  /** rate is the cycles a second of all the loops together. */
  rate: number;
  modes: readonly ReadsMode[];
  /** profileDir, unless "", gets each server's CPU profile when it stops (node --cpu-prof). */
  profileDir: string;
  /** pattern is who asks: "engine", the workers' writes and the scheduler's reads on connections of their own, each at its own pace (vLLM's processes); "loop", each cycle's reads right after its writes on one connection. */
  pattern: LoadPattern;
  /** pin puts the leader alone on core 0 and every other process on core 1 (taskset), on a machine of 2 cores or more. */
  pin: boolean;
}

/** StandbyReadsRow is one measured row: `cycles` done and the CPU the leader and the standbys spent meanwhile. */
export interface StandbyReadsRow {
  round: number;
  mode: ReadsMode;
  cycles: number;
  /** reads is the BatchExists calls asked (READS_PER_CYCLE a cycle at the pace). */
  reads: number;
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

/** Pace is a row's time: its calls paced (round 0 is not), from `start` to `end` (performance.now()). */
interface Pace {
  paced: boolean;
  start: number;
  end: number;
}

/** LoadDone is what a row's load did: the cycles (a BatchAllocate and a ConfirmWrite of new keys) and the BatchExists asked. */
interface LoadDone {
  cycles: number;
  reads: number;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** nextKey numbers the keys the loads write, new in every row. */
let nextKey = 0;
const newKeys = (count: number) => Array.from({ length: count }, () => `key-${nextKey++}`);

/** slots is a wait for the next of `perSecond` evenly spaced slots of a paced row (shifted by `shift` of a slot), shared by the loops that call it; none when unpaced. */
function slots(perSecond: number, { paced, start }: Pace, shift = 0): () => Promise<void> {
  let slot = 0;
  return async () => {
    const wait = start + ((slot++ + shift) * 1_000) / perSecond - performance.now();
    if (paced && wait > 0) await sleep(wait);
  };
}

const connect = (url: string) => createClient(MetadataService, createGrpcTransport({ baseUrl: url }));

/** write is one cycle's writes on `client`: BatchAllocate and ConfirmWrite of `count` new keys, which it returns. */
async function write(client: ReturnType<typeof connect>, count: number): Promise<string[]> {
  const keys = newKeys(count);
  const { pages } = await client.batchAllocate({ namespace: "bench", rank: 0, keys });
  await client.confirmWrite({ namespace: "bench", rank: 0, keys, pages });
  return keys;
}

/** lastWritten keeps the `count` keys written last (at first `count` keys never written: misses), which a read asks of. */
function lastWritten(count: number): { add(keys: string[]): void; readonly keys: string[] } {
  let keys = newKeys(count);
  return {
    add: (written) => {
      keys = [...keys, ...written].slice(-count);
    },
    get keys() {
      return keys;
    },
  };
}

/** loopLoad is the pattern "loop": C loops on one connection, each cycle's BatchExists of the loop's K keys written last right after its writes. */
async function loopLoad(url: string, o: StandbyReadsOptions, pace: Pace): Promise<LoadDone> {
  const client = connect(url);
  const next = slots(o.rate, pace);
  const done = { cycles: 0, reads: 0 };
  const loop = async () => {
    const written = lastWritten(o.readKeys);
    for (await next(); performance.now() < pace.end; await next()) {
      written.add(await write(client, o.batch));
      for (let i = 0; i < READS_PER_CYCLE; i++) await client.batchExists({ namespace: "bench", keys: written.keys });
      done.reads += READS_PER_CYCLE;
      done.cycles++;
    }
  };
  await Promise.all(Array.from({ length: o.clients }, loop));
  return done;
}

/**
 * engineLoad is the pattern "engine", as vLLM's processes ask: C workers,
 * each on a connection of its own, write (BatchAllocate, ConfirmWrite) at
 * the row's pace in all, and the scheduler, on its own, asks READS_PER_CYCLE
 * BatchExists a cycle at its own pace, half a slot apart from the writes, of the K keys
 * written last (vLLM's scheduler asks when it schedules a request, not when
 * a worker has written).
 */
async function engineLoad(url: string, o: StandbyReadsOptions, pace: Pace): Promise<LoadDone> {
  const nextWrite = slots(o.rate, pace);
  const nextRead = slots(READS_PER_CYCLE * o.rate, pace, 0.5);
  const done = { cycles: 0, reads: 0 };
  const written = lastWritten(o.readKeys);
  const worker = async () => {
    const client = connect(url);
    for (await nextWrite(); performance.now() < pace.end; await nextWrite()) {
      written.add(await write(client, o.batch));
      done.cycles++;
    }
  };
  const scheduler = async () => {
    const client = connect(url);
    for (await nextRead(); performance.now() < pace.end; await nextRead()) {
      await client.batchExists({ namespace: "bench", keys: written.keys });
      done.reads++;
    }
  };
  await Promise.all([...Array.from({ length: o.clients }, worker), scheduler()]);
  return done;
}

/** load runs the pattern's load through the relay at `url`. */
const load = (url: string, o: StandbyReadsOptions, pace: Pace) => (o.pattern === "engine" ? engineLoad : loopLoad)(url, o, pace);

/** RELAY_WARMUP_MS is how long each row's new relay is driven, unpaced and uncounted, before the row. */
const RELAY_WARMUP_MS = 1_000;

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
          await sleep(1_500); // its probes find the caught-up members
          // A new relay's first second is its JIT's: unwarmed, the scheduler's reads, one at a time, fell behind a 2 s row's pace.
          if (!idle) await load(relay.url, o, { paced: false, start: performance.now(), end: performance.now() + RELAY_WARMUP_MS });
          const before = { leader: cpuMs(leader.process.pid), standbys: standbys.reduce((sum, m) => sum + cpuMs(m.process.pid), 0) };
          const start = performance.now();
          const end = start + o.seconds * 1_000;
          // Round 0 runs as fast as it can: at the pace, the leader's code for either row was still being compiled a minute in.
          const paced = round > 0;
          const pace = { paced, start, end };
          // "idle" counts its CPU per the cycles the other rows do in as long.
          if (idle) await sleep(end - performance.now());
          const { cycles, reads } = idle ? { cycles: dueCycles, reads: READS_PER_CYCLE * dueCycles } : await load(relay.url, o, pace);
          const leaderMs = cpuMs(leader.process.pid) - before.leader;
          const standbysMs = standbys.reduce((sum, m) => sum + cpuMs(m.process.pid), 0) - before.standbys;
          rows.push({ round, mode, cycles, reads, leaderMs, standbysMs });
          const counts = (await Promise.all(standbys.map((m) => standbyCounts(m.process.url)))).map(
            (c) => `local ${c.local}, lagging ${c.lagging}, behind ${c.behind}`,
          );
          log(
            `round ${round} --reads ${mode}: ${cycles} cycles and ${reads} reads ${paced ? `of ${dueCycles} and ${READS_PER_CYCLE * dueCycles}` : "unpaced (warm-up)"}; leader ${((leaderMs * 1_000) / cycles).toFixed(0)} µs/cycle, standbys ${((standbysMs * 1_000) / cycles).toFixed(0)} µs/cycle; the standbys' reads so far: ${counts.join("; ")}`,
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
    atPace: counted.filter((r) => r.cycles >= 0.95 * dueCycles && r.reads >= 0.95 * READS_PER_CYCLE * dueCycles).length,
    counted: counted.length,
  };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const result = await measureStandbyReads({
    seconds: numberOption("seconds", 5),
    rounds: numberOption("rounds", 2),
    batch: numberOption("batch", 128),
    readKeys: numberOption("read-keys", numberOption("batch", 128)),
    clients: numberOption("clients", 4),
    rate: numberOption("rate", 10),
    modes: choicesOption("modes", READS_MODES, "members,leader"),
    profileDir: option("profile", ""),
    pin: option("pin", "yes") === "yes",
    pattern: choiceOption("pattern", LOAD_PATTERNS, "engine"),
  });
  if (!Number.isNaN(result.leaderRatio))
    console.log(
      `the leader's CPU per cycle, members against leader: ${result.leaderRatio.toFixed(2)}× (${result.atPace} of ${result.counted} rows kept the pace)`,
    );
  if (!Number.isNaN(result.idleUsPerCycle)) console.log(`the leader's CPU idle, per the cycles of a row: ${result.idleUsPerCycle.toFixed(0)} µs`);
}
