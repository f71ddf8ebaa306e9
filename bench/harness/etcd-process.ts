import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { get } from "node:https";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

/**
 * etcd members for the HA tests and benchmarks: Debian's `etcd-server`
 * package, run as child processes on 127.0.0.1 with ephemeral ports and
 * temporary data dirs. The tests kill them after each test
 * (etcd-cluster.ts); a benchmark stops them itself.
 */

const ETCD = "/usr/bin/etcd";

export interface EtcdMember {
  readonly name: string;
  readonly clientUrl: string;
  readonly process: ChildProcess | undefined;
  /** start runs the member (again, on the same data dir and ports) and waits until it answers. */
  start(): Promise<void>;
  /** kill ends the member with SIGKILL and waits for it to exit. */
  kill(): Promise<void>;
  /** stop ends the member with SIGTERM, as systemd and Kubernetes do (etcd hands its leadership on first), and resolves once it exited, with its last stderr if it failed. */
  stop(): Promise<{ exit: string; stderr: string }>;
}

export interface EtcdCluster {
  readonly members: EtcdMember[];
  /** endpoints are the client URLs, comma-separated, as --etcd-endpoints takes them. */
  readonly endpoints: string;
}

/** running holds every etcd process started and not yet known to have exited. */
export const running = new Set<ChildProcess>();

/** freePort asks the kernel for a port that is free now. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.on("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/**
 * EtcdTls makes members serve clients over TLS (https:// client URLs) with
 * this certificate, and accept only clients whose certificate `ca` signed
 * (etcd's --client-cert-auth); `clientCert` and `clientKey` are such a
 * client's, for the test's own health checks.
 */
export interface EtcdTls {
  cert: string;
  key: string;
  ca: string;
  clientCert: string;
  clientKey: string;
}

/** EtcdTiming is etcd's heartbeat interval and election timeout (an election starts within one to two of the timeout after the leader went silent). */
export interface EtcdTiming {
  heartbeatMs: number;
  electionMs: number;
}

/** LOOPBACK_TIMING elects in a few hundred ms instead of etcd's 1 s default: members on one machine. */
const LOOPBACK_TIMING: EtcdTiming = { heartbeatMs: 50, electionMs: 500 };

/** startEtcdCluster starts `size` members that form one cluster, with data under `dataRoot` (a new temporary dir unless given), and waits until every one answers. */
export async function startEtcdCluster(
  size: number,
  dataRoot = mkdtempSync(join(tmpdir(), "hf3fs-metadata-etcd-")),
  tls?: EtcdTls,
  timing: EtcdTiming = LOOPBACK_TIMING,
): Promise<EtcdCluster> {
  const ports = await Promise.all(Array.from({ length: size * 2 }, freePort));
  const names = Array.from({ length: size }, (_, i) => `etcd${i}`);
  const peerUrl = (i: number) => `http://127.0.0.1:${ports[2 * i + 1]}`;
  const initialCluster = names.map((name, i) => `${name}=${peerUrl(i)}`).join(",");
  const scheme = tls === undefined ? "http" : "https";
  const members = names.map((name, i) => member(name, `${scheme}://127.0.0.1:${ports[2 * i]}`, peerUrl(i), initialCluster, join(dataRoot, name), tls, timing));
  await Promise.all(members.map((m) => m.start()));
  return { members, endpoints: members.map((m) => m.clientUrl).join(",") };
}

function member(
  name: string,
  clientUrl: string,
  peerUrl: string,
  initialCluster: string,
  dataDir: string,
  tls: EtcdTls | undefined,
  timing: EtcdTiming,
): EtcdMember {
  let child: ChildProcess | undefined;
  let output = "";
  const args = [
    `--name=${name}`,
    `--data-dir=${dataDir}`,
    `--listen-client-urls=${clientUrl}`,
    `--advertise-client-urls=${clientUrl}`,
    `--listen-peer-urls=${peerUrl}`,
    `--initial-advertise-peer-urls=${peerUrl}`,
    `--initial-cluster=${initialCluster}`,
    "--initial-cluster-state=new",
    "--initial-cluster-token=hf3fs-metadata-test",
    `--heartbeat-interval=${timing.heartbeatMs}`,
    `--election-timeout=${timing.electionMs}`,
    "--log-level=error",
    "--logger=zap",
    ...(tls === undefined ? [] : [`--cert-file=${tls.cert}`, `--key-file=${tls.key}`, `--trusted-ca-file=${tls.ca}`, "--client-cert-auth"]),
  ];
  return {
    name,
    clientUrl,
    get process() {
      return child;
    },
    async start() {
      output = "";
      const started = spawn(ETCD, args, { stdio: ["ignore", "ignore", "pipe"] });
      child = started;
      started.stderr!.on("data", (d) => (output = (output + d).slice(-4_000)));
      running.add(started);
      started.once("exit", () => running.delete(started));
      await waitForHealth(clientUrl, started, () => output, tls);
    },
    async kill() {
      await end(child, "SIGKILL");
    },
    async stop() {
      return { exit: await end(child, "SIGTERM"), stderr: output };
    },
  };
}

/** end sends a running child `signal` and resolves once it exited: "code N" or the signal that ended it ("" if it was not running). */
async function end(child: ChildProcess | undefined, signal: NodeJS.Signals): Promise<string> {
  if (child === undefined || child.exitCode !== null || child.signalCode !== null) return "";
  const exited = new Promise<string>((resolve) => child.once("exit", (code, by) => resolve(by ?? `code ${code}`)));
  child.kill(signal);
  return exited;
}

/** waitForHealth polls the member's /health (its own status; a lone member of a new cluster is not healthy yet, so /version it is). */
async function waitForHealth(clientUrl: string, child: ChildProcess, output: () => string, tls: EtcdTls | undefined): Promise<void> {
  const deadline = Date.now() + 20_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`etcd exited with ${child.exitCode}: ${output()}`);
    const ok = await (tls === undefined ? fetch(`${clientUrl}/version`).then((r) => r.ok) : httpsOk(`${clientUrl}/version`, tls)).catch(() => false);
    if (ok) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`etcd at ${clientUrl} did not answer within 20 s: ${output()}`);
}

/** httpsOk tells whether a GET of url over TLS, presenting the test's client certificate, answers 200. */
function httpsOk(url: string, tls: EtcdTls): Promise<boolean> {
  return new Promise((resolve, reject) => {
    const options = { ca: readFileSync(tls.ca), cert: readFileSync(tls.clientCert), key: readFileSync(tls.clientKey) };
    get(url, options, (response) => {
      response.resume();
      resolve(response.statusCode === 200);
    }).on("error", reject);
  });
}

/** EtcdStatus is what one member says of itself over its HTTP gateway: its id, and the leader it follows ("0" while it knows none). */
export interface EtcdStatus {
  id: string;
  leader: string;
}

/** etcdStatus asks one member (plain http) for its EtcdStatus. */
export async function etcdStatus(clientUrl: string): Promise<EtcdStatus> {
  const res = await fetch(`${clientUrl}/v3/maintenance/status`, { method: "POST", body: "{}" });
  const status = (await res.json()) as { header: { member_id: string }; leader?: string };
  return { id: status.header.member_id, leader: status.leader ?? "0" };
}

/**
 * etcdLeaderIndex is the index in `cluster.members` of etcd's own leader,
 * once a member names one: a test that pauses or kills a member says which
 * it means, since etcd's leader gone stalls every member until they elect
 * another. Every member must answer.
 */
export async function etcdLeaderIndex(cluster: EtcdCluster, withinMs = 10_000): Promise<number> {
  const deadline = performance.now() + withinMs;
  for (;;) {
    const statuses = await Promise.all(cluster.members.map((m) => etcdStatus(m.clientUrl)));
    const leader = statuses.find((s) => s.leader !== "0")?.leader;
    const index = statuses.findIndex((s) => s.id === leader);
    if (index >= 0) return index;
    if (performance.now() > deadline) throw new Error(`no etcd member named a leader within ${withinMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** etcdFollower is a member that is not etcd's leader (the one after it): the one to pause or kill when a test means an endpoint, not an election. */
export async function etcdFollower(cluster: EtcdCluster): Promise<EtcdMember> {
  return cluster.members[((await etcdLeaderIndex(cluster)) + 1) % cluster.members.length]!;
}
