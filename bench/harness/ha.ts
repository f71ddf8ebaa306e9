// The high-availability benchmark's parts: a cluster of 3 etcd members and 3
// servers on this machine, the failover time, and a standby's lag under load.

import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { HealthCheckResponse_ServingStatus as ServingStatus } from "../../gen/grpc/health/v1/health_pb.js";
import { MemberRole, ReplicationService } from "../../gen/hf3fs/metadata/internal/v1/replication_pb.js";
import { MetadataService } from "../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { createHealthClient, createMetadataClient, type MetadataClient } from "../../src/client/index.js";
import { type EtcdCluster, etcdLeaderIndex, freePort, running, startEtcdCluster } from "./etcd-process.js";
import { cpuMs, type ServerProcess, startProcess } from "./processes.js";

/** HaMember is one server of the cluster, with what it takes to start it again on its data dir and port. */
export interface HaMember {
  process: ServerProcess;
  readonly entry: string;
  readonly args: string[];
}

/** HaCluster is 3 etcd members and `size` servers, all on loopback. */
export interface HaCluster {
  etcd: EtcdCluster;
  members: HaMember[];
  urls: string[];
  stop(): Promise<void>;
}

/** startHaCluster starts etcd and the servers (`serverArgs` adds the benchmark's common flags, `nodeArgs` go to node, as --cpu-prof) and waits for a leader. */
export async function startHaCluster(entry: string, serverArgs: (extra: string[]) => string[], size = 3, nodeArgs: string[] = []): Promise<HaCluster> {
  const root = mkdtempSync(join(tmpdir(), "hf3fs-metadata-bench-ha-"));
  const etcd = await startEtcdCluster(3, join(root, "etcd"));
  const members: HaMember[] = [];
  const cluster: HaCluster = {
    etcd,
    members,
    urls: [],
    async stop() {
      await Promise.all(members.map((m) => m.process.stop()));
      for (const child of running) if (child.exitCode === null) child.kill("SIGKILL");
      rmSync(root, { recursive: true, force: true });
    },
  };
  // A member that fails to start, or a cluster without a leader, stops everything started so far: no etcd is left running.
  try {
    const started = await Promise.allSettled(
      Array.from({ length: size }, async (_, i) => {
        const args = serverArgs(["--data-dir", join(root, `member${i}`), "--etcd-endpoints", etcd.endpoints, "--port", String(await freePort())]);
        return { process: await startProcess(entry, args, nodeArgs), entry, args };
      }),
    );
    for (const result of started) if (result.status === "fulfilled") members.push(result.value);
    const failed = started.find((result) => result.status === "rejected");
    if (failed !== undefined) throw failed.reason;
    cluster.urls.push(...members.map((m) => m.process.url));
    await leaderOf(cluster);
  } catch (error) {
    await cluster.stop();
    throw error;
  }
  return cluster;
}

/** clusterCpuMs reads the CPU time so far of the standbys and of the etcd members (the leader's is the benchmark row's own). */
export function clusterCpuMs(cluster: HaCluster, leader: HaMember): { standbysMs: number; etcdMs: number } {
  const standbysMs = cluster.members.filter((m) => m !== leader).reduce((sum, m) => sum + cpuMs(m.process.pid), 0);
  const etcdMs = cluster.etcd.members.reduce((sum, m) => sum + (m.process?.pid === undefined ? 0 : cpuMs(m.process.pid)), 0);
  return { standbysMs, etcdMs };
}

/** leaderOf polls the members' health until one serves MetadataService. */
export async function leaderOf(cluster: HaCluster, except?: HaMember): Promise<HaMember> {
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    for (const member of cluster.members) {
      if (member === except) continue;
      const health = createHealthClient({ baseUrl: member.process.url });
      const res = await health.check({ service: MetadataService.typeName }, { timeoutMs: 500 }).catch(() => undefined);
      if (res?.status === ServingStatus.SERVING) return member;
    }
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error("no leader within 30 s");
}

/**
 * measureFailover runs one writer (BatchAllocate then ConfirmWrite of one
 * new key, over and over, through a client given every member) and kills
 * the leader with SIGKILL `rounds` times, restarting it on its data dir
 * after the next leader serves. A round's time is from the kill to the
 * first acknowledged ConfirmWrite of a cycle begun after the kill (so one
 * the new leader acknowledged).
 */
export async function measureFailover(cluster: HaCluster, rounds: number): Promise<number[]> {
  const writer = await ackedWriter(cluster, "failover", async (client, keys) => {
    const { pages } = await client.batchAllocate({ namespace: "failover", rank: 0, keys });
    await client.confirmWrite({ namespace: "failover", rank: 0, keys, pages });
  });
  const times: number[] = [];
  try {
    for (let round = 0; round < rounds; round++) {
      await new Promise((r) => setTimeout(r, 1_000));
      const leader = await leaderOf(cluster);
      const killedAt = performance.now();
      process.kill(leader.process.pid, "SIGKILL");
      times.push(await writer.ackedAfter(killedAt));
      leader.process = await startProcess(leader.entry, leader.args);
    }
  } finally {
    await writer.stop();
  }
  return times;
}

/**
 * ackedWriter runs `write` of one new key after another against the
 * cluster (on namespace `ns`, rank 0 of 1M pages) until stopped;
 * ackedAfter(t) resolves with the time from t to the first write
 * acknowledged that began after t (one begun before may have been
 * acknowledged by a leader that was killed since).
 */
async function ackedWriter(cluster: HaCluster, ns: string, write: (client: MetadataClient, keys: string[]) => Promise<void>) {
  const client = createMetadataClient({ baseUrl: cluster.urls.join(","), retry: { deadlineMs: 30_000, initialBackoffMs: 20, maxBackoffMs: 200 } });
  await client.initializeRank({ namespace: ns, rank: 0, numPages: 1 << 20, worldSize: 1 });
  let stopped = false;
  let lastAck = 0;
  let ackedAt = 0;
  const loop = (async () => {
    for (let i = 0; !stopped; i++) {
      const started = performance.now();
      await write(client, [`${ns}-${i}`]);
      lastAck = started;
      ackedAt = performance.now();
    }
  })();
  return {
    async ackedAfter(t: number): Promise<number> {
      while (lastAck <= t) await new Promise((r) => setTimeout(r, 5));
      return ackedAt - t;
    },
    async stop(): Promise<void> {
      stopped = true;
      await loop;
    },
  };
}

/**
 * measureEtcdLeaderLoss kills etcd's own leader `rounds` times under a
 * writer (the service's leader stays up) and returns, for each, the time
 * from the kill to the first write acknowledged that began after it; the
 * etcd member is started again between rounds.
 */
export async function measureEtcdLeaderLoss(cluster: HaCluster, rounds: number): Promise<number[]> {
  const writer = await ackedWriter(cluster, "etcd-loss", async (client, keys) => {
    await client.batchAllocate({ namespace: "etcd-loss", rank: 0, keys });
  });
  const times: number[] = [];
  try {
    for (let round = 0; round < rounds; round++) {
      await new Promise((r) => setTimeout(r, 2_000));
      const leader = cluster.etcd.members[await etcdLeaderIndex(cluster.etcd)]!;
      const killedAt = performance.now();
      await leader.kill();
      times.push(await writer.ackedAfter(killedAt));
      await leader.start();
    }
  } finally {
    await writer.stop();
  }
  return times;
}

/** LagSample is how far the standbys were behind the leader, in log entries, over a run. */
export interface LagSummary {
  samples: number;
  meanEntries: number;
  maxEntries: number;
  /** entriesPerSec is the leader's append rate over the run, to read lag in time (entries / rate). */
  entriesPerSec: number;
}

/** sampleLag reads the cluster's status every 250 ms until `done` resolves. The members publish their applied entry about twice a second, so each sample is ±0.5 s old. */
export async function sampleLag(url: string, done: Promise<unknown>): Promise<LagSummary> {
  const client = createClient(ReplicationService, createGrpcTransport({ baseUrl: url }));
  const lags: number[] = [];
  const seqs: [number, number][] = [];
  let finished = false;
  void done.then(() => (finished = true));
  while (!finished) {
    const status = await client.status({}).catch(() => undefined);
    const leader = status?.members.find((m) => m.role === MemberRole.LEADER);
    if (status !== undefined && leader !== undefined) {
      seqs.push([performance.now(), Number(leader.appliedSeq)]);
      for (const m of status.members) if (m !== leader) lags.push(Math.max(0, Number(leader.appliedSeq - m.appliedSeq)));
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  const [first, last] = [seqs[0], seqs.at(-1)];
  const entriesPerSec = first !== undefined && last !== undefined && last[0] > first[0] ? ((last[1] - first[1]) * 1_000) / (last[0] - first[0]) : 0;
  return {
    samples: lags.length,
    meanEntries: lags.reduce((a, b) => a + b, 0) / Math.max(lags.length, 1),
    maxEntries: Math.max(0, ...lags),
    entriesPerSec,
  };
}
