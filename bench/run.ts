// npm run bench [-- --quick] [-- --only=cycle,floor,...]: the benchmark
// harness. Servers and load run in separate processes; every row reports the
// server's CPU beside the client's, so a saturated client is visible.

import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { availableParallelism, cpus, tmpdir } from "node:os";
import { join } from "node:path";
import { create, toBinary } from "@bufbuild/protobuf";
import { BatchExistsRequestSchema, GetLocationsRequestSchema } from "../gen/hf3fs/metadata/v1/metadata_pb.js";
import { cycleClient, type TransportName } from "./harness/cycle-clients.js";
import { clusterCpuMs, leaderOf, measureEtcdLeaderLoss, measureFailover, sampleLag, startHaCluster } from "./harness/ha.js";
import { benchKey } from "./harness/keys.js";
import type { LoadConfig, LoadResult } from "./harness/load.js";
import { h2loadInstalled, type NativeLoadResult, nativeLoad } from "./harness/native-load.js";
import { runLoad, SERVER, type ServerProcess, serverArgs, startProcess } from "./harness/processes.js";
import { coreRates } from "./probes/core-bench.js";
import { measureFloor } from "./probes/floor.js";
import { measureLimits } from "./probes/limits.js";
import { type PrefixConfig, type PrefixResult, runPrefixStream } from "./probes/prefix-stream.js";
import { fillStore, measureRecovery } from "./probes/recovery.js";
import { measureRelay, measureRelayFailover, relaySummary } from "./probes/relay.js";
import { measureShardScale } from "./probes/shard-scale.js";
import { measureShards, measureShardsAtOneRate } from "./probes/shards.js";
import { measureStandbyReads, type StandbyReadsResult } from "./probes/standby-reads.js";
import { measureStartup } from "./probes/startup.js";

const args = process.argv.slice(2);
const quick = args.includes("--quick");
const only = args
  .find((a) => a.startsWith("--only="))
  ?.slice(7)
  .split(",");
const enabled = (name: string) => only === undefined || only.includes(name);
const WARMUP_MS = quick ? 200 : 700;
const DURATION_MS = quick ? 400 : 2_000;
/** The ha workload's rows run longer: on 2 cores shared by 7 processes, 2 s rows of the same code gave ratios from 0.21 to 0.43. */
const HA_TIMING = { warmupMs: quick ? 200 : 2_000, durationMs: quick ? 400 : 10_000 };
const RANKS = 8;
const NUM_PAGES = 100_000;

/** Row is one measured configuration. */
interface Row {
  workload: string;
  transport: string;
  batch: number;
  concurrency: number;
  cyclesPerSec: number;
  keysPerSec: number;
  callsPerSec: number;
  allocateP50Ms: number;
  allocateP99Ms: number;
  callP99Ms: number;
  callMaxMs: number;
  serverCpuPct: number;
  clientCpuPct: number;
  serverCpuPerCallUs: number;
  serverCpuPerKeyUs: number;
  serverRssMb: number;
  saturated: string;
  errors: number;
  noSpace: number;
  /** rpc holds p50/p90/p99/max latency (ms) and the count of each RPC of the cycle; in the JSON, not the table. */
  rpc: LoadResult["rpc"];
}

const rows: Row[] = [];
let keyOffset = 0;
/** nextKeyOffset gives each load run keys no other run used. */
function nextKeyOffset(): number {
  keyOffset += 1e9;
  return keyOffset;
}

async function cycle(
  server: ServerProcess,
  workload: string,
  transport: TransportName,
  batch: number,
  concurrency: number,
  numPages = NUM_PAGES,
  { warmupMs = WARMUP_MS, durationMs = DURATION_MS } = {},
): Promise<Row> {
  const config: LoadConfig = {
    url: server.url,
    transport,
    batch,
    concurrency,
    connections: transport === "lean-grpc" ? Math.min(concurrency, 2) : 1,
    ranks: RANKS,
    numPages,
    warmupMs,
    durationMs,
    keyOffset: nextKeyOffset(),
  };
  const { result, serverCpuMs, serverRssMb } = await runLoad<LoadResult>(config, server.pid);
  const seconds = result.elapsedMs / 1_000;
  const calls = result.cycles * 4;
  const all = Object.values(result.rpc);
  const serverCpuPct = (serverCpuMs / result.elapsedMs) * 100;
  const clientCpuPct = (result.clientCpuMs / result.elapsedMs) * 100;
  const row: Row = {
    workload,
    transport,
    batch,
    concurrency,
    cyclesPerSec: result.cycles / seconds,
    keysPerSec: result.keys / seconds,
    callsPerSec: calls / seconds,
    allocateP50Ms: result.rpc.allocate.p50,
    allocateP99Ms: result.rpc.allocate.p99,
    callP99Ms: Math.max(...all.map((r) => r.p99)),
    callMaxMs: Math.max(...all.map((r) => r.max)),
    serverCpuPct,
    clientCpuPct,
    serverCpuPerCallUs: calls > 0 ? (serverCpuMs * 1_000) / calls : 0,
    serverCpuPerKeyUs: result.keys > 0 ? (serverCpuMs * 1_000) / result.keys : 0,
    serverRssMb,
    saturated: serverCpuPct > 90 ? "server" : clientCpuPct > 90 ? "client" : "neither",
    errors: result.errors,
    noSpace: result.noSpace,
    rpc: result.rpc,
  };
  rows.push(row);
  printRow(row);
  return row;
}

/** FULL_PAGES is the rank size of the full workload. */
const FULL_PAGES = 20_000;

/** fillRanks fills a server's ranks of `pages` pages past 90% with complete keys, so that in the window after it every new key evicts one. */
async function fillRanks(server: ServerProcess, pages: number): Promise<void> {
  const fillConfig: LoadConfig = {
    url: server.url,
    transport: "lean-grpc",
    batch: 512,
    concurrency: RANKS,
    connections: 2,
    ranks: RANKS,
    numPages: pages,
    warmupMs: 0,
    durationMs: quick ? 500 : 1_500,
    keyOffset: nextKeyOffset(),
  };
  await runLoad<LoadResult>(fillConfig, server.pid);
}

async function withServer<T>(entry: string, extra: string[], body: (s: ServerProcess) => Promise<T>): Promise<T> {
  const server = await startProcess(entry, entry === SERVER ? serverArgs(extra) : extra);
  try {
    return await body(server);
  } finally {
    await server.stop();
  }
}

const fmt = (n: number, digits = 0) => n.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits });

function printHeader(): void {
  console.log(
    [
      "workload",
      "transport",
      "B",
      "C",
      "cycles/s",
      "keys/s",
      "calls/s",
      "alloc p50",
      "alloc p99",
      "call p99",
      "max ms",
      "srv CPU%",
      "cli CPU%",
      "µs/call",
      "µs/key",
      "RSS MB",
      "saturated",
    ]
      .map((h, i) => (i < 2 ? h.padEnd(i === 0 ? 10 : 14) : h.padStart(10)))
      .join(""),
  );
}

function printRow(r: Row): void {
  console.log(
    [
      r.workload.padEnd(10),
      r.transport.padEnd(14),
      ...[
        fmt(r.batch),
        fmt(r.concurrency),
        fmt(r.cyclesPerSec),
        fmt(r.keysPerSec),
        fmt(r.callsPerSec),
        fmt(r.allocateP50Ms, 2),
        fmt(r.allocateP99Ms, 2),
        fmt(r.callP99Ms, 2),
        fmt(r.callMaxMs, 1),
        fmt(r.serverCpuPct),
        fmt(r.clientCpuPct),
        fmt(r.serverCpuPerCallUs, 1),
        fmt(r.serverCpuPerKeyUs, 2),
        fmt(r.serverRssMb),
        r.saturated + (r.errors ? ` ${r.errors} errors` : "") + (r.noSpace ? ` ${r.noSpace} no-space` : ""),
      ].map((c) => c.padStart(10)),
    ].join(""),
  );
}

const report: Record<string, unknown> = {
  date: new Date().toISOString(),
  node: process.version,
  cpus: cpus().length,
  cpuModel: cpus()[0]?.model,
  quick,
};
const started = Date.now();
const coresAtStart = availableParallelism();
printHeader();

if (enabled("cycle")) {
  await withServer(SERVER, ["--in-memory"], async (server) => {
    const grid = quick
      ? [
          [1, 16],
          [64, 16],
        ]
      : [1, 64, 128, 512].flatMap((b) => [1, 16, 64].map((c) => [b, c]));
    for (const [b, c] of grid) await cycle(server, "cycle", "lean-grpc", b!, c!);
    // The product's clients look like @grpc/grpc-js (so do Python grpcio and Go), not like the lean client: the targets' rows.
    for (const b of quick ? [1] : [1, 128, 512]) await cycle(server, "cycle", "grpc-js", b, 16);
    // vLLM's workers send at most 128 keys per allocate and locations call: its JSON routes beside gRPC at the same sizes.
    for (const b of quick ? [] : [128, 512]) await cycle(server, "cycle", "vllm-json", b, 16);
  });
}

if (enabled("full")) {
  // Ranks 90% full of complete keys before the measured window: every new key evicts one.
  await withServer(SERVER, ["--in-memory"], async (server) => {
    await fillRanks(server, FULL_PAGES);
    await cycle(server, "full", "lean-grpc", 64, 16, FULL_PAGES);
  });
}

if (enabled("prefix")) {
  // The same request stream against a server of each eviction policy; then the full workload (every new key evicts) on each.
  const config: PrefixConfig = {
    seed: 1,
    prefixes: 300,
    zipf: 1,
    pagesPerPrefixBlock: 0.5,
    warmupRequests: quick ? 300 : 2_000,
    requests: quick ? 300 : 4_000,
  };
  const results: Record<string, PrefixResult & { fullServerCpuPerKeyUs: number }> = {};
  for (const eviction of ["prefix", "lru"]) {
    const stream = await withServer(SERVER, ["--in-memory", "--eviction", eviction], (s) => runPrefixStream(s.url, s.pid, config));
    const full = await withServer(SERVER, ["--in-memory", "--eviction", eviction], async (server) => {
      await fillRanks(server, FULL_PAGES);
      return cycle(server, `full-${eviction}`, "lean-grpc", 64, 16, FULL_PAGES);
    });
    results[eviction] = { ...stream, fullServerCpuPerKeyUs: full.serverCpuPerKeyUs };
    const e = stream.evictions;
    console.log(
      `prefix    --eviction ${eviction.padEnd(6)} ${fmt(stream.requests)} requests on ${fmt(stream.numPages)} pages: ${fmt(stream.leadingHits, 2)} leading hits per request (${fmt(stream.leadingHitRate * 100, 1)}% of blocks), ${fmt(stream.reachable * 100, 1)}% of stored keys reachable, ${fmt(stream.serverCpuPerBlockUs, 1)} µs/block; evictions ${fmt(e.total!)} (orphan ${fmt(e.orphan!)}, leaf ${fmt(e.leaf!)}, lru ${fmt(e.lru!)}, inline ${fmt(e.inline!)}); full workload ${fmt(full.serverCpuPerKeyUs, 2)} µs/key`,
    );
  }
  report.prefix = { config, results, leadingHitsPrefixOverLru: results.prefix!.leadingHits / results.lru!.leadingHits };
  console.log(`prefix    leading hits, prefix-aware over plain LRU: ${fmt(results.prefix!.leadingHits / results.lru!.leadingHits, 2)}`);
}

if (enabled("transports")) {
  const transports: TransportName[] = quick ? ["vllm-json"] : ["connect-grpc", "grpc-js", "connect-binary", "connect-json", "vllm-json"];
  await withServer(SERVER, ["--in-memory"], async (server) => {
    for (const t of transports) await cycle(server, "transports", t, 64, 16);
  });
}

if (enabled("floor")) {
  if (!h2loadInstalled()) {
    const message = "floor     h2load not found: apt-get install nghttp2-client to run this workload";
    if (process.env.CI === "true") throw new Error(message);
    console.log(message);
  } else {
    // 4 connections x 4 streams; B=512: one request of keys the real server holds among 200,000; B=1: the per-call floor.
    const floorRows = quick
      ? await measureFloor({ batch: 64, liveKeys: 2_048, seconds: 1, connections: 2, streams: 2 })
      : [
          ...(await measureFloor({ batch: 512, liveKeys: 200_000, seconds: 3, connections: 4, streams: 4 })),
          ...(await measureFloor({ batch: 1, liveKeys: 200_000, seconds: 3, connections: 4, streams: 4 })),
        ];
    const bare = new Map(floorRows.filter((r) => r.server === "bare").map((r) => [`${r.call} ${r.batch}`, r.serverCpuPerCallUs]));
    const ratios: Record<string, number> = {};
    for (const r of floorRows) {
      const ratio = r.serverCpuPerCallUs / bare.get(`${r.call} ${r.batch}`)!;
      ratios[`${r.server} ${r.call} B=${r.batch}`] = ratio;
      console.log(
        `floor     ${r.server.padEnd(8)} ${r.call.padEnd(27)} B=${r.batch}: ${fmt(r.callsPerSec).padStart(7)} calls/s, ${fmt(r.serverCpuPerCallUs, 1).padStart(6)} µs/call of server CPU, ${fmt(ratio, 2)}× bare`,
      );
    }
    report.floor = { rows: floorRows, overBare: ratios };
  }
}

if (enabled("native")) await nativeWorkload();

/**
 * nativeWorkload drives read-only calls with h2load against the server and
 * against the floor server: B=1 BatchExists and GetLocations of one key, and
 * B=512 BatchExists, every key confirmed beforehand.
 */
async function nativeWorkload(): Promise<void> {
  if (!h2loadInstalled()) {
    // CI installs it (.ci/run); elsewhere say how, and fail where it must run.
    const message = "native    h2load not found: apt-get install nghttp2-client to run this workload";
    if (process.env.CI === "true") throw new Error(message);
    console.log(message);
    return;
  }
  const namespace = "native";
  const keys = [benchKey(1, 0xfeed)];
  // B=512: the read path at the batch size engines send, every key present.
  const batch = Array.from({ length: 512 }, (_, i) => benchKey(i + 2, 0xfeed));
  const calls: [name: string, method: string, b: number, message: Uint8Array][] = [
    ["BatchExists", "BatchExists", 1, toBinary(BatchExistsRequestSchema, create(BatchExistsRequestSchema, { namespace, keys }))],
    ["GetLocations", "GetLocations", 1, toBinary(GetLocationsRequestSchema, create(GetLocationsRequestSchema, { namespace, rank: 0, keys }))],
    ["BatchExists", "BatchExists", 512, toBinary(BatchExistsRequestSchema, create(BatchExistsRequestSchema, { namespace, keys: batch }))],
  ];
  const results: Record<string, NativeLoadResult> = {};
  for (const entry of [SERVER, "bench/harness/floor-server.ts"]) {
    await withServer(entry, entry === SERVER ? ["--in-memory"] : [], async (server) => {
      const client = cycleClient("lean-grpc", server.url);
      await client.init(namespace, 0, 1_000);
      for (const confirm of [keys, batch]) {
        await client.confirm(
          namespace,
          0,
          confirm,
          await client.allocate(
            namespace,
            0,
            confirm,
            confirm.map(() => ""),
          ),
        );
      }
      client.close();
      for (const [method, rpc, b, message] of calls) {
        const name = `${entry === SERVER ? "service" : "floor"} ${method}`;
        const r = await nativeLoad(server.url, server.pid, rpc, message, { connections: 1, streams: 64, durationSec: quick ? 1 : 3 });
        results[`${name} B=${b}`] = r;
        const perKey = b > 1 ? `, ${fmt(r.serverCpuPerCallUs / b, 2)} µs/key` : "";
        console.log(
          `native    ${name.padEnd(22)} B=${b}, 64 in flight: ${fmt(r.callsPerSec).padStart(7)} calls/s, server ${fmt(r.serverCpuPct)}% CPU, ${fmt(r.serverCpuPerCallUs, 1)} µs/call${perKey}; h2load ${fmt(r.clientCpuPct)}% CPU`,
        );
      }
    });
  }
  report.native = results;
}

if (enabled("core")) {
  const sizes = quick ? [10_000, 100_000] : [10_000, 1_000_000, 10_000_000];
  const core = [];
  for (const numPages of sizes) {
    for (const r of coreRates(numPages, [0, 0.5, 0.99], quick ? 100 : 700)) {
      core.push(r);
      console.log(`core      num_pages ${fmt(numPages).padStart(12)}  fill ${fmt(r.fill * 100).padStart(3)}%  ${fmt(r.pageOpsPerSec).padStart(12)} page ops/s`);
    }
  }
  const rates = core.map((r) => r.pageOpsPerSec);
  report.core = { grid: core, maxOverMin: Math.max(...rates) / Math.min(...rates) };
  console.log(`core      max/min across the grid: ${fmt(Math.max(...rates) / Math.min(...rates), 2)}`);
}

if (enabled("limits")) {
  const r = measureLimits(quick ? 20_480 : 1_048_576, quick ? 100_000 : 2_000_000, 4_096);
  report.limits = r;
  console.log(
    `limits    ${fmt(r.emptyRanks)} empty ranks: ${fmt(r.bytesPerEmptyRank)} bytes each; a GetStats page of ${r.statsPageNamespaces} namespaces ${fmt(r.statsPageMs, 1)} ms; BatchAllocate of ${fmt(r.allocateBatch)} on a full rank of ${fmt(r.leasedKeys)} leased keys ${fmt(r.allocateOnLeasedRankMs, 1)} ms`,
  );
}

if (enabled("durable")) {
  const dataDir = join(tmpdir(), "hf3fs-metadata-bench-durable");
  rmSync(dataDir, { recursive: true, force: true });
  const memory = await withServer(SERVER, ["--in-memory"], (s) => cycle(s, "memory", "lean-grpc", 64, 16));
  const durable = await withServer(SERVER, ["--data-dir", dataDir], (s) => cycle(s, "durable", "lean-grpc", 64, 16));
  rmSync(dataDir, { recursive: true, force: true });
  const keys = quick ? 20_000 : 1_000_000;
  const recoveryDir = join(tmpdir(), "hf3fs-metadata-bench-recovery");
  await fillStore(recoveryDir, keys, RANKS);
  const recovery = await measureRecovery(recoveryDir);
  rmSync(recoveryDir, { recursive: true, force: true });
  report.durable = {
    durableOverMemory: durable.keysPerSec / memory.keysPerSec,
    recovery: {
      keys,
      ranks: RANKS,
      ms: recovery.ms,
      records: recovery.records,
      heapMb: recovery.heapMb,
      bytesPerKeyPerRank: (recovery.heapMb * 2 ** 20) / (keys * RANKS),
    },
  };
  console.log(`durable   durable/in-memory keys/s at B=64 C=16: ${fmt(durable.keysPerSec / memory.keysPerSec, 2)}`);
  console.log(
    `durable   recovery of ${fmt(keys)} keys on ${RANKS} ranks: ${fmt(recovery.ms)} ms; heap ${fmt(recovery.heapMb)} MB = ${fmt((recovery.heapMb * 2 ** 20) / (keys * RANKS))} bytes per key per rank`,
  );
}

if (enabled("startup")) {
  // From spawning the CLI (the compiled build, as `npm start` runs it) to listening, and to serving with its store loaded.
  report.startup = await measureStartup(quick ? 20_000 : 1_000_000, RANKS, quick ? 2 : 5);
}

if (enabled("ha")) {
  // Side by side in one run: the single-node default (LMDB) and a cluster of 3 servers on 3 etcd members, all on this machine.
  const dataDir = join(tmpdir(), "hf3fs-metadata-bench-single");
  rmSync(dataDir, { recursive: true, force: true });
  const single = await withServer(SERVER, ["--data-dir", dataDir], (s) => cycle(s, "single", "lean-grpc", 64, 16, NUM_PAGES, HA_TIMING));
  rmSync(dataDir, { recursive: true, force: true });
  const cluster = await startHaCluster(SERVER, serverArgs);
  try {
    const leader = await leaderOf(cluster);
    const cpuBefore = clusterCpuMs(cluster, leader);
    const loadStarted = performance.now();
    const load = cycle(leader.process, "ha", "lean-grpc", 64, 16, NUM_PAGES, HA_TIMING);
    const lag = await sampleLag(cluster.urls.find((u) => u !== leader.process.url)!, load);
    const ha = await load;
    const cpuAfter = clusterCpuMs(cluster, leader);
    // The whole run, warm-up included: the share of the machine's cores the rest of the cluster took while the leader served.
    const elapsed = performance.now() - loadStarted;
    const others = {
      standbysCpuPct: ((cpuAfter.standbysMs - cpuBefore.standbysMs) / elapsed) * 100,
      etcdCpuPct: ((cpuAfter.etcdMs - cpuBefore.etcdMs) / elapsed) * 100,
    };
    console.log(
      `ha        meanwhile: the 2 standbys took ${fmt(others.standbysCpuPct)}% of a core, the 3 etcd members ${fmt(others.etcdCpuPct)}% (of ${cpus().length} cores)`,
    );
    const failover = await measureFailover(cluster, quick ? 1 : 5);
    const sorted = [...failover].sort((a, b) => a - b);
    report.ha = {
      haOverSingle: ha.keysPerSec / single.keysPerSec,
      lag,
      ...others,
      failoverMs: failover,
      failoverMedianMs: sorted[Math.floor(sorted.length / 2)],
    };
    console.log(`ha        HA/single-node keys/s at B=64 C=16: ${fmt(ha.keysPerSec / single.keysPerSec, 2)}`);
    console.log(
      `ha        standby lag under that load: mean ${fmt(lag.meanEntries, 1)}, max ${fmt(lag.maxEntries)} log entries (${lag.samples} samples; leader appends ${fmt(lag.entriesPerSec)} entries/s, so max ≈ ${fmt((lag.maxEntries / Math.max(lag.entriesPerSec, 1)) * 1_000)} ms)`,
    );
    console.log(
      `ha        failover (kill -9 of the leader to the first acknowledged ConfirmWrite): ${failover.map((ms) => fmt(ms)).join(", ")} ms; median ${fmt(sorted[Math.floor(sorted.length / 2)]!)} ms`,
    );
    const etcdLoss = await measureEtcdLeaderLoss(cluster, quick ? 1 : 3);
    (report.ha as Record<string, unknown>).etcdLeaderLossMs = etcdLoss;
    console.log(`ha        etcd's leader killed (to the first acknowledged write begun after): ${etcdLoss.map((ms) => fmt(ms)).join(", ")} ms`);
  } finally {
    await cluster.stop();
  }
}

if (enabled("standby-reads")) {
  // #43's measure: the leader's CPU per cycle of vLLM's mix (BatchAllocate, ConfirmWrite, 3 BatchExists of 128 keys), asked as
  // its processes ask (workers write, the scheduler reads on its own connection at its own pace), with the caught-up standbys
  // answering the reads, over with every read on it; at a slow pace, where the idle member's timers weigh,
  // and at a busier one (25: at 40 the core that runs all but the leader did not always keep the pace). The leader alone on core 0.
  const results: StandbyReadsResult[] = [];
  for (const rate of quick ? [25] : [10, 25]) {
    const result = await measureStandbyReads(
      {
        seconds: quick ? 2 : 5,
        rounds: quick ? 1 : 2,
        batch: 128,
        readKeys: 128,
        clients: 4,
        rate,
        modes: ["members", "leader"],
        profileDir: "",
        pin: true,
        pattern: "engine",
      },
      (line) => console.log(`standby   ${rate}/s ${line}`),
    );
    results.push(result);
    console.log(
      `standby   ${rate} cycles/s: the leader's CPU per cycle, reads on the standbys over reads on it: ${fmt(result.leaderRatio, 2)}× (${result.atPace} of ${result.counted} rows kept the pace)`,
    );
  }
  report.standbyReads = results;
  // The probe pins this process to one core while it runs: every bench after it would measure one core if it stayed so.
  if (availableParallelism() !== coresAtStart) throw new Error(`standby-reads left this process on ${availableParallelism()} of ${coresAtStart} cores`);
}

if (enabled("relay")) {
  const relayRows = await measureRelay(quick ? 1 : 2, { warmupMs: WARMUP_MS, durationMs: DURATION_MS });
  const summary = relaySummary(relayRows);
  report.relay = { rows: relayRows, ...summary };
  const each = (values: number[]) => values.map((v) => fmt(v, 2)).join(", ");
  console.log(
    `relay     upstream server CPU per key through the relay / the server's own gRPC, per alternation: ${each(summary.upstreamCpuPerKeyOverGrpc)} at C=16, ${each(summary.upstreamCpuPerKeyOverGrpcAtC1)} at C=1 (connect-node client); ${each(summary.upstreamCpuPerKeyOverLeanGrpc)} and ${each(summary.upstreamCpuPerKeyOverLeanGrpcAtC1)} (lean client); ${each(summary.upstreamCpuPerKeyOverPacedLeanGrpc)} and ${each(summary.upstreamCpuPerKeyOverPacedLeanGrpcAtC1)} (lean client at the relay's rate)`,
  );
  console.log(
    `relay     p50 added per call, per alternation: ${each(summary.addedP50Ms)} ms at C=16, ${each(summary.addedP50MsAtC1)} ms at C=1 (a bare proxy: ${each(summary.bareProxyAddedP50MsAtC1)} ms)`,
  );
  const failover = await measureRelayFailover(quick ? 1 : 5);
  const sorted = [...failover.longestCallSeconds].sort((a, b) => a - b);
  (report.relay as Record<string, unknown>).failover = { ...failover, medianLongestCallSeconds: sorted[Math.floor(sorted.length / 2)] };
  console.log(
    `relay     leader killed for good, the vLLM-policy worker's longest call (median of ${sorted.length}): ${fmt(sorted[Math.floor(sorted.length / 2)]!, 2)} s, ${failover.errors} errors`,
  );
}

if (enabled("shards")) {
  // S = 1 first in each round: the others are compared to it.
  // A relay and servers just started are still being compiled: 700 ms of warm-up left S=1 at 2-3× its CPU per key after 2 s.
  const timing = quick ? { warmupMs: WARMUP_MS, durationMs: DURATION_MS } : { warmupMs: 2_000, durationMs: 4_000 };
  const shardRows = await measureShards(quick ? [1, 2] : [1, 2, 4], quick ? 1 : 3, timing);
  // Then S=1 against each S at one rate, which the rows above are not (bench/probes/shards.ts).
  report.shards = { rows: shardRows, atOneRate: await measureShardsAtOneRate(shardRows, quick ? 1 : 3, timing) };
}

if (enabled("shard-scale")) {
  // The quick rows' 200 + 400 ms saw no cycle of S=2 finish (its first cycles, through two relays on 2 cores, take longer): 0 keys/s.
  report.shardScale = {
    rows: await measureShardScale(quick ? 1 : 3, quick ? { warmupMs: 1_000, durationMs: 1_500 } : { warmupMs: WARMUP_MS, durationMs: DURATION_MS }),
  };
}

report.rows = rows;
report.elapsedSec = (Date.now() - started) / 1_000;
const dir = new URL("./results/", import.meta.url).pathname;
mkdirSync(dir, { recursive: true });
const file = join(dir, `bench-${quick ? "quick-" : ""}${new Date().toISOString().replaceAll(":", "-")}.json`);
writeFileSync(file, `${JSON.stringify(report, null, 2)}\n`);
console.log(`\n${rows.length} rows in ${fmt(report.elapsedSec as number)} s; written to ${file}`);
