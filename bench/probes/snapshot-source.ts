// snapshot-source.ts [--keys=N] [--rounds=R] [--entries=A,B]: what a member's snapshot costs the leader. Per round and
// entry: 3 etcd members and 3 servers of that build; N keys (200,000) written in calls of 128 (a log entry each: past the 1,000 entries the log keeps), so that its start is
// compacted away; then a 4th member started empty loads a snapshot and catches up. Prints the CPU the leader and the two
// standbys spent from the 4th member's start until it is caught up (health SERVING), and that time. Builds alternate
// round by round (--entries, default this checkout's only).
// Run: node --import tsx bench/probes/snapshot-source.ts --entries=src/cli/main.ts,../old/src/cli/main.ts
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { HealthCheckResponse_ServingStatus as ServingStatus } from "../../gen/grpc/health/v1/health_pb.js";
import { createHealthClient, createMetadataClient } from "../../src/client/index.js";
import { freePort } from "../harness/etcd-process.js";
import { leaderOf, startHaCluster } from "../harness/ha.js";
import { option } from "../harness/options.js";
import { cpuMs, SERVER, serverArgs, startProcess } from "../harness/processes.js";

const keys = Number(option("keys", "200000"));
const rounds = Number(option("rounds", "2"));
const entries = option("entries", SERVER).split(",");
const B = 128;

/** caughtUp waits until the member at url says it is loaded and caught up (health of the server, ""). */
async function caughtUp(url: string): Promise<void> {
  const health = createHealthClient({ baseUrl: url });
  for (;;) {
    const res = await health.check({ service: "" }, { timeoutMs: 1_000 }).catch(() => undefined);
    if (res?.status === ServingStatus.SERVING) return;
    await new Promise((r) => setTimeout(r, 20));
  }
}

for (let round = 0; round < rounds; round++) {
  for (const entry of round % 2 === 0 ? entries : [...entries].reverse()) {
    const cluster = await startHaCluster(entry, serverArgs, 3);
    const dir = mkdtempSync(join(tmpdir(), "hf3fs-metadata-bench-snapshot-"));
    try {
      const leader = await leaderOf(cluster);
      const standbys = cluster.members.filter((m) => m !== leader);
      const client = createMetadataClient({ baseUrl: leader.process.url });
      await client.initializeRank({ namespace: "snap", rank: 0, numPages: keys, worldSize: 1 });
      for (let i = 0; i < keys; i += B) {
        const batch = Array.from({ length: Math.min(B, keys - i) }, (_, j) => `snapshot-key-${i + j}`);
        const { pages } = await client.batchAllocate({ namespace: "snap", rank: 0, keys: batch });
        await client.confirmWrite({ namespace: "snap", rank: 0, keys: batch, pages });
      }
      await new Promise((r) => setTimeout(r, 5_000)); // two compactions: the log's start is gone, the 4th member must load a snapshot
      const before = { leader: cpuMs(leader.process.pid), standbys: standbys.map((m) => cpuMs(m.process.pid)) };
      const started = performance.now();
      const args = serverArgs(["--data-dir", dir, "--etcd-endpoints", cluster.etcd.endpoints, "--port", String(await freePort())]);
      const fourth = await startProcess(entry, args);
      try {
        await caughtUp(fourth.url);
        const tookMs = performance.now() - started;
        const standbysMs = standbys.map((m, i) => Math.round(cpuMs(m.process.pid) - before.standbys[i]!));
        console.log(
          `round ${round} ${entry}: caught up in ${Math.round(tookMs)} ms; leader ${Math.round(cpuMs(leader.process.pid) - before.leader)} ms of CPU, standbys ${standbysMs.join(" and ")} ms`,
        );
      } finally {
        await fourth.stop();
      }
    } finally {
      await cluster.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  }
}
