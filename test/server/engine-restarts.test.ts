import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { describe, expect, it } from "vitest";
import type { StandbyCounts } from "../../bench/harness/standby-counts.js";
import { ClusterService } from "../../gen/hf3fs/metadata/v1/cluster_pb.js";
import { PORT_IN_USE } from "../../src/cli/listen-early.js";
import { type ChildServer, type SpawnedChild, spawnChildRelay, startChildRelay, startChildServer } from "../support/child-server.js";
import { lacking } from "../support/debian-packages.js";
import { type Engine, type EngineRun, engines } from "../support/engine-clients.js";
import { type EtcdCluster, type EtcdMember, startEtcdCluster } from "../support/etcd-cluster.js";
import { readyMember, type Server, startServer as startMember, waitForLeader } from "../support/ha-cluster.js";
import { activationSocket } from "../support/socket-activation.js";
import { readCounts } from "../support/standby-counts.js";
import { tempDir } from "../support/temp-dir.js";
import { freePort } from "../support/test-server.js";

const missing = lacking("the engine restart tests", "requests");
const missingEtcd = missing === "" ? lacking("the engine restart tests on a cluster", "etcd") : missing;

const ROUNDS = 3;

/**
 * Restartable is one process restarted the way systemd and a Kubernetes
 * rollout do it: SIGTERM, wait for the exit, start again at once on the
 * same port (and data dir).
 */
interface Restartable {
  /** prepare runs before the stop: what comes up before the old process goes (a DaemonSet's surge). */
  prepare?(): Promise<void>;
  /** stop sends SIGTERM and resolves once the process exited: "" if it exited cleanly, else how it ended and its stderr. */
  stop(): Promise<string>;
  /** start runs it again, and resolves once it is up. */
  start(): Promise<void>;
}

/** restart stops `target` with SIGTERM, waits for its exit, starts it again, and returns how long the old process took to exit. */
async function restart(target: Restartable): Promise<number> {
  await target.prepare?.();
  const sent = Date.now();
  const failed = await target.stop();
  const tookMs = Date.now() - sent;
  expect(failed, "a clean exit after SIGTERM").toBe("");
  await target.start();
  return tookMs;
}

/** restartable is a server or relay process as a Restartable, `start` its next process; `started` hears of each. */
function restartable(first: ChildServer, start: () => Promise<ChildServer>, started: (process: ChildServer) => void = () => {}): Restartable {
  let process = first;
  return {
    stop: async () => {
      process.child.kill("SIGTERM");
      const code = await process.exited;
      return code === 0 ? "" : `exit code ${code}; stderr: ${process.stderr}`;
    },
    start: async () => {
      process = await start();
      started(process);
    },
  };
}

/**
 * surging is a relay replaced as a DaemonSet with maxSurge replaces its
 * pod on the node's network: the next process starts first and waits for
 * the port (its readiness probe meanwhile answered by the old one), then
 * the old one gets SIGTERM; `waited` hears of each next one that waited.
 */
function surging(first: ChildServer, args: string[], waited: () => void): Restartable {
  let process = first;
  let next: SpawnedChild | undefined;
  return {
    prepare: async () => {
      next = spawnChildRelay(args);
      await next.logged(PORT_IN_USE);
      waited();
    },
    stop: async () => {
      process.child.kill("SIGTERM");
      const code = await process.exited;
      return code === 0 ? "" : `exit code ${code}; stderr: ${process.stderr}`;
    },
    start: async () => {
      process = await next!.listening;
    },
  };
}

/** ENGINES are both engines, their readers idle 3 s between turns, as vLLM's scheduler between requests. */
const ENGINES = engines(3);

/**
 * rideThrough runs an engine against engineUrl while ROUNDS times the
 * process `pick` names is restarted, and checks that no call failed, that
 * each old process exited within 2 s of its SIGTERM, and that every key the
 * engine stored is there at the end.
 */
async function rideThrough(start: (url: string) => Promise<Engine>, engineUrl: string, pick: () => Promise<Restartable>): Promise<EngineRun> {
  const engine = await start(engineUrl);
  await engine.progress(5);
  const exits: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    exits.push(await restart(await pick()));
    await engine.progress(5);
  }
  const run = await engine.stop();
  console.log(
    `an engine across ${ROUNDS} SIGTERM restarts: ${run.calls} calls, ${run.retried} answered after a retry (${run.refused} after a connection refused; the longest ${run.longestCall}), exits after ${exits.join(", ")} ms, ${run.stored} keys stored`,
  );
  expect(run.errors).toEqual([]);
  for (const tookMs of exits) expect(tookMs).toBeLessThan(2_000);
  expect(await run.missing(engineUrl)).toEqual([]);
  expect(run.stored).toBeGreaterThanOrEqual(5 * (ROUNDS + 1));
  return run;
}

/** memberOf is a cluster member as a Restartable: started again on its port and data dir, and counted as up once ready (health "" SERVING: loaded and, on a standby, caught up), as Kubernetes waits for it. */
function memberOf(member: Server): Restartable {
  const start = async () => {
    const started = await startChildServer(member.args);
    await started.logged("cluster: joined");
    await readyMember(started);
    return started;
  };
  return restartable(member.process, start, (started) => (member.process = started));
}

/** etcdMemberOf is an etcd member as a Restartable: etcd ends by its own SIGTERM once it handed on its leadership, and is up once healthy. */
function etcdMemberOf(member: EtcdMember): Restartable {
  return {
    stop: async () => {
      const { exit, stderr } = await member.stop();
      return exit === "SIGTERM" || exit === "code 0" ? "" : `${exit}; stderr: ${stderr}`;
    },
    start: () => member.start(),
  };
}

for (const [engine, start] of ENGINES) {
  describe.skipIf(missing !== "")(`${engine} sees no error when`, () => {
    it("a single-node server is restarted by SIGTERM-wait-start three times", async () => {
      const args = ["--data-dir", tempDir(), "--port", String(await freePort())];
      const first = await startChildServer(args);
      const server = restartable(first, () => startChildServer(args));
      await rideThrough(start, first.url, async () => server);
    }, 120_000);

    it("a single-node server socket-activated (systemd's socket unit keeps its port) is restarted by SIGTERM-wait-start three times: none refused", async () => {
      const socket = await activationSocket();
      const args = ["--data-dir", tempDir(), "--port", String(socket.port)];
      const first = await startChildServer(args, {}, socket.wrapper);
      const server = restartable(first, () => startChildServer(args, {}, socket.wrapper));
      const run = await rideThrough(start, first.url, async () => server);
      // Between the old process and the new one, connections wait in the socket's backlog.
      expect(run.refused).toBe(0);
    }, 120_000);

    it("its relay is restarted by SIGTERM-wait-start three times (a sidecar restarted by its pod)", async () => {
      const upstream = await startChildServer(["--data-dir", tempDir()]);
      const args = ["--upstream", upstream.url, "--port", String(await freePort())];
      const first = await startChildRelay(args);
      const relay = restartable(first, () => startChildRelay(args));
      await rideThrough(start, first.url, async () => relay);
    }, 120_000);

    it("its relay socket-activated (systemd's socket unit keeps its port) is restarted by SIGTERM-wait-start three times: none refused", async () => {
      const upstream = await startChildServer(["--data-dir", tempDir()]);
      const socket = await activationSocket();
      const args = ["--upstream", upstream.url, "--port", String(socket.port)];
      const first = await startChildRelay(args, {}, socket.wrapper);
      const relay = restartable(first, () => startChildRelay(args, {}, socket.wrapper));
      const run = await rideThrough(start, first.url, async () => relay);
      expect(run.refused).toBe(0);
    }, 120_000);

    it("its relay is replaced as a DaemonSet with maxSurge replaces it: the next one started first, waiting for the port, then the old one stopped by SIGTERM", async () => {
      const upstream = await startChildServer(["--data-dir", tempDir()]);
      const args = ["--upstream", upstream.url, "--port", String(await freePort()), "--port-wait", "60s"];
      const first = await startChildRelay(args);
      let waited = 0;
      const relay = surging(first, args, () => waited++);
      const run = await rideThrough(start, first.url, async () => relay);
      expect(waited).toBe(ROUNDS); // each next relay was up, waiting for the port, before the old one was stopped
      // The old one handed the port over before it told its connections to end: each reconnected to a port that was taken.
      expect(run.refused).toBe(0);
    }, 120_000);
  });

  describe.skipIf(missing !== "")(`${engine}, through its relay,`, () => {
    it("takes its readers' turns while the server is down (SIGTERM, started again later): their reads answered as misses, not held, and no error", async () => {
      const args = ["--data-dir", tempDir(), "--port", String(await freePort())];
      let server = await startChildServer(args);
      const relay = await startChildRelay(["--upstream", server.url]);
      // Readers idle 0.2 s between turns, so that several come while the server is down.
      const quick = engines(0.2).find(([name]) => name === engine)![1];
      const running = await quick(relay.url);
      await running.progress(3);
      server.child.kill("SIGTERM");
      expect(await server.exited).toBe(0);
      // Held for --hold (60 s) and each of their client's retries, the reads would stop the engine's scheduling meanwhile.
      await running.readersProgress(5);
      server = await startChildServer(args);
      await running.progress(3);
      const run = await running.stop();
      console.log(`an engine through a server down: ${run.calls} calls, ${run.unreached} reads answered as misses, the longest ${run.longestCall}`);
      expect(run.errors).toEqual([]);
      expect(run.unreached).toBeGreaterThanOrEqual(5);
      expect(await run.missing(relay.url)).toEqual([]);
    }, 60_000);
  });

  describe.skipIf(missingEtcd !== "")(`${engine} in front of a cluster sees no error when`, () => {
    it("through a relay, the cluster's leader is restarted by SIGTERM-wait-start three times", async () => {
      const etcd: EtcdCluster = await startEtcdCluster(1);
      const members: Server[] = [await startMember(etcd), await startMember(etcd)];
      const leader = await waitForLeader(members);
      // A cluster of one shard answers its topology too (read from etcd when asked): its members, the leader first.
      const topology = await createClient(ClusterService, createGrpcTransport({ baseUrl: members[1]!.url })).getTopology({});
      expect([topology.shardCount, topology.shards[0]!.members.map((m) => [m.url, m.leader])]).toEqual([
        1,
        [
          [leader.url, true],
          [members.find((m) => m !== leader)!.url, false],
        ],
      ]);
      const relay = await startChildRelay(["--upstream", members.map((m) => m.url).join(",")]);
      await rideThrough(start, relay.url, async () => memberOf(await waitForLeader(members)));
    }, 180_000);

    it("with no relay, the one member it is given (SGLang's metadata_server_url), the leader at first, is restarted by SIGTERM-wait-start three times", async () => {
      const etcd: EtcdCluster = await startEtcdCluster(1);
      const members: Server[] = [await startMember(etcd), await startMember(etcd)];
      const given = await waitForLeader(members);
      // Its port is bound again from the new process's first moments, and calls wait there until it serves (or forwards).
      await rideThrough(start, given.url, async () => memberOf(given));
    }, 180_000);

    it("through a relay told one member, the leaders of a cluster of 3 shards are restarted by SIGTERM-wait-start in turn (a rollout)", async () => {
      const etcd: EtcdCluster = await startEtcdCluster(1);
      const args = (shard: number) => ["--cluster-name", "rolled", "--shards", "3", "--shard", String(shard)];
      const shards = await Promise.all(
        [0, 1, 2].map(async (shard) => [await startMember(etcd, undefined, args(shard)), await startMember(etcd, undefined, args(shard))]),
      );
      await Promise.all(shards.map((members) => waitForLeader(members)));
      // The relay learns the 3 shards from a member of shard 1 (ClusterService), and follows each shard's leader.
      const relay = await startChildRelay(["--upstream", shards[1]![0]!.url]);
      let round = 0;
      await rideThrough(start, relay.url, async () => memberOf(await waitForLeader(shards[round++ % 3]!)));
    }, 180_000);

    it("through a relay spreading reads, every member of 3 is restarted by SIGTERM-wait-start, the last first, each once the one before is ready (a StatefulSet's rolling update)", async () => {
      const etcd: EtcdCluster = await startEtcdCluster(1);
      const members: Server[] = [await startMember(etcd), await startMember(etcd), await startMember(etcd)];
      await waitForLeader(members);
      const relay = await startChildRelay(["--upstream", members.map((m) => m.url).join(",")]);
      // The reads each member took as a standby, read before its restart (which starts its counts again) and at the end.
      const took: StandbyCounts[] = [];
      let next = members.length;
      await rideThrough(start, relay.url, async () => {
        const member = members[--next]!;
        took.push(await readCounts(member));
        return memberOf(member);
      });
      for (const member of members) took.push(await readCounts(member));
      const local = took.reduce((sum, c) => sum + c.local, 0);
      const passedOn = took.reduce((sum, c) => sum + c.lagging + c.behind, 0);
      // An idle reader's first read at a standby goes on to the leader while the standby learns where it stands; the next ones it answers.
      console.log(`the rolling update: the standbys answered ${local} reads and passed ${passedOn} on to the leader`);
      expect(local + passedOn).toBeGreaterThan(0);
    }, 180_000);

    it("through a relay, each member of etcd's cluster of 3 is restarted by SIGTERM-wait-start in turn, the next once it is healthy (an etcd upgrade)", async () => {
      const etcd: EtcdCluster = await startEtcdCluster(3);
      const members: Server[] = [await startMember(etcd), await startMember(etcd)];
      await waitForLeader(members);
      const relay = await startChildRelay(["--upstream", members.map((m) => m.url).join(",")]);
      let next = etcd.members.length;
      await rideThrough(start, relay.url, async () => etcdMemberOf(etcd.members[--next]!));
    }, 180_000);
  });
}
