import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { mkdtempSync } from "node:fs";
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

/**
 * etcdMissing says why the HA tests cannot run here ("" when they can).
 * Under CI=true a missing etcd is a failure, not a skip: the caller throws.
 */
export function etcdMissing(): string {
  const probe = spawnSync(ETCD, ["--version"], { encoding: "utf8" });
  if (probe.status === 0) return "";
  const why = `etcd is not installed (${ETCD}); apt-get install etcd-server`;
  if (process.env.CI === "true") throw new Error(`CI=true and ${why}`);
  return why;
}

export interface EtcdMember {
  readonly name: string;
  readonly clientUrl: string;
  readonly process: ChildProcess | undefined;
  /** start runs the member (again, on the same data dir and ports) and waits until it answers. */
  start(): Promise<void>;
  /** kill ends the member with SIGKILL and waits for it to exit. */
  kill(): Promise<void>;
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

/** startEtcdCluster starts `size` members that form one cluster, with data under `dataRoot` (a new temporary dir unless given), and waits until every one answers. */
export async function startEtcdCluster(size: number, dataRoot = mkdtempSync(join(tmpdir(), "hf3fs-metadata-etcd-"))): Promise<EtcdCluster> {
  const ports = await Promise.all(Array.from({ length: size * 2 }, freePort));
  const names = Array.from({ length: size }, (_, i) => `etcd${i}`);
  const peerUrl = (i: number) => `http://127.0.0.1:${ports[2 * i + 1]}`;
  const initialCluster = names.map((name, i) => `${name}=${peerUrl(i)}`).join(",");
  const members = names.map((name, i) => member(name, `http://127.0.0.1:${ports[2 * i]}`, peerUrl(i), initialCluster, join(dataRoot, name)));
  await Promise.all(members.map((m) => m.start()));
  return { members, endpoints: members.map((m) => m.clientUrl).join(",") };
}

function member(name: string, clientUrl: string, peerUrl: string, initialCluster: string, dataDir: string): EtcdMember {
  let child: ChildProcess | undefined;
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
    // Loopback: elections in a few hundred ms instead of the 1 s default.
    "--heartbeat-interval=50",
    "--election-timeout=500",
    "--log-level=error",
    "--logger=zap",
  ];
  return {
    name,
    clientUrl,
    get process() {
      return child;
    },
    async start() {
      let output = "";
      child = spawn(ETCD, args, { stdio: ["ignore", "ignore", "pipe"] });
      child.stderr!.on("data", (d) => (output = (output + d).slice(-4_000)));
      running.add(child);
      await waitForHealth(clientUrl, child, () => output);
    },
    async kill() {
      if (child === undefined || child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((resolve) => child!.once("exit", resolve));
      child.kill("SIGKILL");
      await exited;
    },
  };
}

/** waitForHealth polls the member's /health (its own status; a lone member of a new cluster is not healthy yet, so /version it is). */
async function waitForHealth(clientUrl: string, child: ChildProcess, output: () => string): Promise<void> {
  const deadline = Date.now() + 20_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`etcd exited with ${child.exitCode}: ${output()}`);
    const ok = await fetch(`${clientUrl}/version`).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`etcd at ${clientUrl} did not answer within 20 s: ${output()}`);
}
