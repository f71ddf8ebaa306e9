import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { assertInvariants } from "../../bench/harness/invariants.js";
import { HealthCheckResponse_ServingStatus as ServingStatus } from "../../gen/grpc/health/v1/health_pb.js";
import { MetadataService } from "../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { createHealthClient } from "../../src/client/index.js";
import type { Change } from "../../src/core/change.js";
import { systemClock } from "../../src/core/clock.js";
import { MetadataState } from "../../src/core/state.js";
import { LmdbStore } from "../../src/store/lmdb-store.js";
import { type ChildServer, startChildServer } from "./child-server.js";
import { type EtcdCluster, freePort } from "./etcd-cluster.js";
import { tempDir } from "./temp-dir.js";

/** Server is one member of a test cluster: its process (replaced on restart), its data dir and the arguments it runs with. */
export class Server {
  /** earlier are the member's processes before its restarts, oldest first, for their logs. */
  readonly earlier: ChildServer[] = [];

  constructor(
    readonly dataDir: string,
    readonly args: string[],
    public process: ChildServer,
  ) {}

  get url(): string {
    return this.process.url;
  }
}

/** startServer runs a member on etcd with its own data dir (a new one unless given), on a port of its own, and returns once it joined the cluster (its store is open). */
export async function startServer(etcd: EtcdCluster, dataDir = tempDir(), extra: string[] = []): Promise<Server> {
  const port = await freePort();
  const args = ["--data-dir", dataDir, "--etcd-endpoints", etcd.endpoints, "--port", String(port), ...extra];
  return new Server(dataDir, args, await startMember(args));
}

/** restartServer starts a member again on its data dir and port (the URL clients know stays good), and returns once it joined. */
export async function restartServer(server: Server): Promise<void> {
  server.earlier.push(server.process);
  server.process = await startMember(server.args);
}

/** startMember starts a member's process and waits until it joined the cluster: it listens from its first moments, before it opened its store. */
async function startMember(args: string[]): Promise<ChildServer> {
  const process = await startChildServer(args);
  await process.logged("cluster: joined");
  return process;
}

/** kill9 kills a member's process with SIGKILL and waits until it is gone. */
export async function kill9(server: Server): Promise<void> {
  server.process.child.kill("SIGKILL");
  await server.process.exited;
}

/** serving reads a member's health of `service` ("" for the server); NOT_SERVING when it does not answer. */
export async function serving(server: { readonly url: string }, service: string): Promise<boolean> {
  const health = createHealthClient({ baseUrl: server.url });
  const res = await health.check({ service }, { timeoutMs: 1_000 }).catch(() => undefined);
  return res?.status === ServingStatus.SERVING;
}

/** readyMember waits until the member answers health "" SERVING (loaded and, on a standby, caught up), as a StatefulSet's readiness probe does. */
export async function readyMember(member: { readonly url: string }, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await serving(member, ""))) {
    if (Date.now() > deadline) throw new Error(`${member.url} not ready within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** waitForLeader polls the members' health until exactly one serves MetadataService, and returns it. */
export async function waitForLeader(servers: readonly Server[], timeoutMs = 20_000): Promise<Server> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const alive = servers.filter((s) => s.process.child.exitCode === null && s.process.child.signalCode === null);
    const leading = await Promise.all(alive.map((s) => serving(s, MetadataService.typeName)));
    const leaders = alive.filter((_, i) => leading[i]);
    if (leaders.length === 1) return leaders[0]!;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`no single leader within ${timeoutMs} ms`);
}

/** StoredState is what a member's data dir holds: its applied log entry and every record, in a canonical order. */
export interface StoredState {
  appliedSeq: number;
  records: string[];
}

/**
 * readStored opens a member's store read-only (the member may run: LMDB
 * readers do not block its writer), checks the state it restores to
 * against every invariant, and returns its records.
 */
export async function readStored(dataDir: string): Promise<StoredState> {
  const store = await LmdbStore.open(dataDir, { readOnly: true });
  try {
    const appliedSeq = store.appliedSeq;
    const changes: Change[] = [...store.stored()];
    const state = new MetadataState(systemClock, undefined, false);
    state.restore(changes);
    assertInvariants(state);
    return { appliedSeq, records: changes.map((c) => JSON.stringify(c)).sort() };
  } finally {
    await store.close();
  }
}

/** waitForConvergence waits until every data dir holds the same applied entry and records, and returns that state. */
export async function waitForConvergence(dataDirs: readonly string[], timeoutMs = 20_000): Promise<StoredState> {
  const deadline = Date.now() + timeoutMs;
  let last: StoredState[] = [];
  while (Date.now() < deadline) {
    last = await Promise.all(dataDirs.map(readStored));
    const first = JSON.stringify(last[0]);
    if (last.every((s) => JSON.stringify(s) === first)) return last[0]!;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`members did not converge within ${timeoutMs} ms: applied ${last.map((s) => s.appliedSeq).join(", ")}`);
}

/** keysUnder lists the keys under a cluster's `folder` in etcd (etcdctl), with etcdctl's options of order and limit. */
async function keysUnder(etcd: EtcdCluster, clusterName: string, folder: string, options: string[] = []): Promise<string[]> {
  const prefix = `/hf3fs-metadata/${clusterName}/${folder}/`;
  const { stdout } = await promisify(execFile)("/usr/bin/etcdctl", ["--endpoints", etcd.endpoints, "get", "--prefix", "--keys-only", ...options, prefix]);
  return stdout.split("\n").filter((l) => l !== "");
}

/** logEntry is the sequence number of the first or the last entry of a cluster's log in etcd; 0 when it is empty. */
export async function logEntry(etcd: EtcdCluster, which: "first" | "last", clusterName = "default"): Promise<number> {
  const order = `--order=${which === "first" ? "ASCEND" : "DESCEND"}`;
  const [key] = await keysUnder(etcd, clusterName, "log", ["--sort-by=KEY", order, "--limit", "1"]);
  return key === undefined ? 0 : Number.parseInt(key.slice(-16), 16);
}

/** memberRecords counts the member records of a cluster in etcd: each is put with its member's lease, and lapses with it. */
export async function memberRecords(etcd: EtcdCluster, clusterName = "default"): Promise<number> {
  return (await keysUnder(etcd, clusterName, "members")).length;
}

/**
 * waitForStandbys waits until every running standby's data dir holds the
 * log to its end and they hold the same records, and returns that state.
 * The leader's store may stand at an earlier entry (it copies nothing
 * while a standby keeps the state: LocalCopy); it is read too, so that the
 * state it restores to is checked against every invariant.
 */
export async function waitForStandbys(
  etcd: EtcdCluster,
  servers: readonly Server[],
  {
    timeoutMs = 20_000,
    leader: known,
    clusterName = "default",
  }: {
    timeoutMs?: number;
    /** leader is the leader, where its health cannot be read (TLS) */
    leader?: Server;
    /** clusterName names the log in etcd: a shard's is `<cluster>/shard-<k>-of-<S>` */
    clusterName?: string;
  } = {},
): Promise<StoredState> {
  const deadline = Date.now() + timeoutMs;
  let last: StoredState[] = [];
  let end = 0;
  while (Date.now() < deadline) {
    const leader = known ?? (await waitForLeader(servers, Math.max(1, deadline - Date.now())));
    end = await logEntry(etcd, "last", clusterName);
    const standbys = servers.filter((s) => s !== leader && s.process.child.exitCode === null && s.process.child.signalCode === null);
    last = await Promise.all(standbys.map((s) => readStored(s.dataDir)));
    await readStored(leader.dataDir);
    const first = JSON.stringify(last[0]);
    if (last.length > 0 && last[0]!.appliedSeq >= end && last.every((s) => JSON.stringify(s) === first)) return last[0]!;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`the standbys did not reach the log's end (${end}) together within ${timeoutMs} ms: applied ${last.map((s) => s.appliedSeq).join(", ")}`);
}
