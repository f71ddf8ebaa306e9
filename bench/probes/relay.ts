// The relay's cost, side by side in one run (npm run bench -- --only=relay):
// vLLM JSON clients straight to a server, and the same clients through a
// relay in front of another server on this machine, alternated; the server's
// own gRPC cost per key beside them. A relay moves the JSON work off the
// server: its upstream gets only binary gRPC.

import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import type { LoadResult } from "../harness/load.js";
import { cycleConfig, runLoad, SERVER, serverArgs, startProcess } from "../harness/processes.js";

/** RelayRow is one measured configuration of the relay workload, in one alternation (`round`). */
export interface RelayRow {
  round: number;
  path: "direct vllm-json" | "relay vllm-json" | "bare proxy vllm-json" | "direct grpc" | "direct lean grpc" | "paced lean grpc";
  batch: number;
  concurrency: number;
  keysPerSec: number;
  serverCpuPerKeyUs: number;
  relayCpuPerKeyUs: number;
  /** callP50Ms is the median of the cycle's four calls' p50s. */
  callP50Ms: number;
  errors: number;
}

/**
 * measureRelay runs each path `rounds` times, alternated, at B=128 (the
 * largest batch vLLM's workers send) and C=16, then the vLLM JSON paths at
 * C=1, where no call waits for another's CPU: there the p50 added is the
 * relay's own time per call. The bare proxy (bare-proxy.ts, in front of the
 * direct server) is the floor of that: the two HTTP exchanges of a hop,
 * without translation or checks. The lean gRPC client sends what the relay
 * sends upstream (its transport), so the server's CPU per key under it is
 * what the JSON work leaving the server should leave; a server's CPU per
 * key rises as its rate falls, so the paced row runs that client at the
 * rate the relay's row reached, for the comparison at one rate.
 */
export async function measureRelay(rounds: number, timing: { warmupMs: number; durationMs: number }): Promise<RelayRow[]> {
  const batch = 128;
  const direct = await startProcess(SERVER, serverArgs(["--in-memory"]));
  const behind = await startProcess(SERVER, serverArgs(["--in-memory"]));
  const relay = await startProcess(SERVER, ["relay", "--host", "127.0.0.1", "--port", "0", "--upstream", behind.url]);
  const proxy = await startProcess("bench/harness/bare-proxy.ts", [direct.url]);
  const rows: RelayRow[] = [];
  let offset = 5e9;
  try {
    const paths = [
      ["direct vllm-json", direct.url, direct, "vllm-json", 16],
      ["relay vllm-json", relay.url, behind, "vllm-json", 16],
      ["bare proxy vllm-json", proxy.url, direct, "vllm-json", 16],
      ["direct grpc", direct.url, direct, "connect-grpc", 16],
      ["direct lean grpc", direct.url, direct, "lean-grpc", 16],
      ["paced lean grpc", direct.url, direct, "lean-grpc", 16],
      ["direct vllm-json", direct.url, direct, "vllm-json", 1],
      ["relay vllm-json", relay.url, behind, "vllm-json", 1],
      ["bare proxy vllm-json", proxy.url, direct, "vllm-json", 1],
      ["direct grpc", direct.url, direct, "connect-grpc", 1],
      ["direct lean grpc", direct.url, direct, "lean-grpc", 1],
      ["paced lean grpc", direct.url, direct, "lean-grpc", 1],
    ] as const;
    // The cycles per second the relay's row reached last, by concurrency: the paced row runs the lean client at that rate.
    const relayRate = new Map<number, number>();
    for (let round = 0; round < rounds; round++) {
      for (const [path, url, server, transport, concurrency] of paths) {
        offset += 1e9;
        const cyclesPerSecond = path === "paced lean grpc" ? relayRate.get(concurrency) : undefined;
        const config = cycleConfig(url, { transport, batch, concurrency, connections: 1, keyOffset: offset, cyclesPerSecond, ...timing });
        const hop = path === "relay vllm-json" ? [relay.pid] : path === "bare proxy vllm-json" ? [proxy.pid] : [];
        const { result, serverCpuMs, otherCpuMs } = await runLoad<LoadResult>(config, server.pid, hop);
        const p50s = Object.values(result.rpc)
          .map((r) => r.p50)
          .sort((a, b) => a - b);
        const row: RelayRow = {
          round,
          path,
          batch,
          concurrency,
          keysPerSec: result.keys / (result.elapsedMs / 1_000),
          serverCpuPerKeyUs: (serverCpuMs * 1_000) / Math.max(result.keys, 1),
          relayCpuPerKeyUs: ((otherCpuMs[0] ?? 0) * 1_000) / Math.max(result.keys, 1),
          callP50Ms: (p50s[1]! + p50s[2]!) / 2,
          errors: result.errors,
        };
        console.log(
          `relay     ${path.padEnd(20)} B=${batch} C=${concurrency}: ${Math.round(row.keysPerSec)} keys/s, server ${row.serverCpuPerKeyUs.toFixed(2)} µs/key, relay ${row.relayCpuPerKeyUs.toFixed(2)} µs/key, call p50 ${row.callP50Ms.toFixed(2)} ms, ${row.errors} errors`,
        );
        if (path === "relay vllm-json") relayRate.set(concurrency, result.cycles / (result.elapsedMs / 1_000));
        rows.push(row);
      }
    }
  } finally {
    await Promise.all([relay.stop(), proxy.stop(), direct.stop(), behind.stop()]);
  }
  return rows;
}

/**
 * relaySummary compares the paths within each alternation (the machine's
 * speed moves between them): per round, the upstream's CPU per key through
 * the relay over each gRPC row's, and the p50 the relay and the bare proxy
 * add to the straight vLLM JSON calls.
 */
export function relaySummary(rows: readonly RelayRow[]) {
  const rounds = [...new Set(rows.map((r) => r.round))];
  const of = (round: number, path: RelayRow["path"], concurrency: number) =>
    rows.find((r) => r.round === round && r.path === path && r.concurrency === concurrency)!;
  const perRound = (value: (round: number) => number) => rounds.map(value);
  const cpuOver = (path: RelayRow["path"], c: number) => perRound((n) => of(n, "relay vllm-json", c).serverCpuPerKeyUs / of(n, path, c).serverCpuPerKeyUs);
  const added = (path: RelayRow["path"], c: number) => perRound((n) => of(n, path, c).callP50Ms - of(n, "direct vllm-json", c).callP50Ms);
  return {
    upstreamCpuPerKeyOverGrpc: cpuOver("direct grpc", 16),
    upstreamCpuPerKeyOverGrpcAtC1: cpuOver("direct grpc", 1),
    upstreamCpuPerKeyOverLeanGrpc: cpuOver("direct lean grpc", 16),
    upstreamCpuPerKeyOverLeanGrpcAtC1: cpuOver("direct lean grpc", 1),
    upstreamCpuPerKeyOverPacedLeanGrpc: cpuOver("paced lean grpc", 16),
    upstreamCpuPerKeyOverPacedLeanGrpcAtC1: cpuOver("paced lean grpc", 1),
    addedP50Ms: added("relay vllm-json", 16),
    addedP50MsAtC1: added("relay vllm-json", 1),
    bareProxyAddedP50MsAtC1: added("bare proxy vllm-json", 1),
  };
}

/** VLLM_CLIENT is the worker with vLLM's exact retry policy (the tests' own), run by Debian's Python. */
const VLLM_CLIENT = new URL("../harness/vllm_policy_client.py", import.meta.url).pathname;

/**
 * measureRelayFailover: through a relay in front of a cluster (3 etcd
 * members, 3 servers), a vLLM-policy worker runs while the leader is killed
 * with -9 and not restarted within the round (restarted after it, for the
 * next); each round reports the longest call the worker saw, and its errors.
 */
export async function measureRelayFailover(rounds: number): Promise<{ longestCallSeconds: number[]; errors: number }> {
  const { startHaCluster, leaderOf } = await import("../harness/ha.js");
  const cluster = await startHaCluster(SERVER, serverArgs);
  const relay = await startProcess(SERVER, ["relay", "--host", "127.0.0.1", "--port", "0", "--upstream", cluster.urls.join(",")]);
  const longest: number[] = [];
  let errors = 0;
  try {
    for (let round = 0; round < rounds; round++) {
      const worker = vllmWorker(relay.url);
      await worker.steps(5);
      const leader = await leaderOf(cluster);
      process.kill(leader.process.pid, "SIGKILL");
      await worker.steps(10);
      const summary = await worker.stop();
      longest.push(summary.longestCallSeconds);
      errors += summary.errors.length;
      console.log(
        `relay     failover round ${round + 1}: longest call ${summary.longestCallSeconds.toFixed(2)} s, ${summary.errors.length} errors, ${summary.lost} lost`,
      );
      leader.process = await startProcess(leader.entry, leader.args);
    }
  } finally {
    await relay.stop();
    await cluster.stop();
  }
  return { longestCallSeconds: longest, errors };
}

/** vllmWorker runs the vLLM-policy worker against url (2 ranks): steps(n) waits for n more turns of its loop, stop() ends it and reads its summary. */
function vllmWorker(url: string) {
  const child = spawn("/usr/bin/python3", [VLLM_CLIENT, url, "2", "4096", "0"], { stdio: ["pipe", "pipe", "inherit"] });
  let steps = 0;
  const waiters: (() => void)[] = [];
  const summary = new Promise<{ longestCallSeconds: number; errors: string[]; lost: number }>((resolve, reject) => {
    createInterface({ input: child.stdout }).on("line", (line) => {
      const event = JSON.parse(line) as { steps?: number; longestCallSeconds: number; errors: string[]; lost: number };
      if (event.steps === undefined) return resolve(event);
      steps = event.steps;
      for (const waiter of waiters.splice(0)) waiter();
    });
    child.once("exit", (code) => reject(new Error(`the vLLM-policy worker exited with ${code}`)));
  });
  return {
    async steps(n: number): Promise<void> {
      const target = steps + n;
      while (steps < target) await Promise.race([new Promise<void>((resolve) => waiters.push(resolve)), summary.then(() => undefined)]);
    },
    stop() {
      child.stdin.end();
      return summary;
    },
  };
}
