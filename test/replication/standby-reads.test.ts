import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { describe, expect, it } from "vitest";
import { MetadataService } from "../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { DEFAULT_NAMESPACE, keyShard } from "../../src/core/index.js";
import { LOG_POSITION, MIN_POSITION, SHARD_LOCAL_HEADER } from "../../src/protocol/headers.js";
import { startChildRelay } from "../support/child-server.js";
import { lacking } from "../support/debian-packages.js";
import { type Engine, SglangEngine, VllmEngine } from "../support/engine-clients.js";
import { etcdFollower, startEtcdCluster } from "../support/etcd-cluster.js";
import { kill9, type Server, startServer, waitForLeader } from "../support/ha-cluster.js";
import { existsAtPositions, readLog } from "../support/log-replay.js";
import { readCounts, untilLocal } from "../support/standby-counts.js";
import { until } from "../support/until.js";

const missing = lacking("the standby reads tests", "etcd", "requests");

/** LAG is the members' --standby-read-lag: long enough that a machine busy with other tests keeps them fresh, shorter than the 2 s pause. */
const LAG = ["--standby-read-lag", "1s"];

const grpc = (server: Server) => createClient(MetadataService, createGrpcTransport({ baseUrl: server.url }));

/** leaderAndStandby starts a member pair on one etcd, defines namespace's rank 0, and returns once the standby answers reads itself. */
async function leaderAndStandby(namespace: string, numPages: number): Promise<{ leader: Server; standby: Server }> {
  const etcd = await startEtcdCluster(1);
  const servers = await Promise.all([0, 1].map(() => startServer(etcd, undefined, LAG)));
  const leader = await waitForLeader(servers);
  const standby = servers.find((s) => s !== leader)!;
  await grpc(leader).initializeRank({ namespace, rank: 0, numPages, worldSize: 1 });
  await untilLocal(standby, namespace);
  return { leader, standby };
}

/** threeMembersAndRelay starts 3 members on one etcd and a relay given them all, with a worker and a scheduler, each its own connection to the relay, as vLLM runs them. */
async function threeMembersAndRelay() {
  const etcd = await startEtcdCluster(1);
  const servers = await Promise.all([0, 1, 2].map(() => startServer(etcd, undefined, LAG)));
  const leader = await waitForLeader(servers);
  const relay = await startChildRelay(["--upstream", servers.map((s) => s.url).join(",")]);
  const client = () => createClient(MetadataService, createGrpcTransport({ baseUrl: relay.url }));
  return { leader, standbys: servers.filter((s) => s !== leader), worker: client(), scheduler: client() };
}

describe.skipIf(missing !== "")("reads on caught-up standbys", () => {
  it("a standby answers BatchExists itself; a client that writes through it reads its writes, and one that names its write's position too", async () => {
    const { leader, standby } = await leaderAndStandby("r", 10_000);

    // Written and read through the standby (vLLM's client given one member): every read sees the write before it.
    const before = await readCounts(standby);
    const through = grpc(standby);
    for (let i = 0; i < 40; i++) {
      const keys = [`via-${i}`];
      const { pages } = await through.batchAllocate({ namespace: "r", rank: 0, keys });
      await through.confirmWrite({ namespace: "r", rank: 0, keys, pages });
      expect((await through.batchExists({ namespace: "r", keys })).exists).toEqual([true]);
    }
    const after = await readCounts(standby);
    // Most reads are answered by the standby itself: after a brief wait for the write's entry, or at once.
    expect(after.local - before.local).toBeGreaterThan(20);

    // Written on the leader, read on the standby with the write's position: never before it.
    for (let i = 0; i < 40; i++) {
      const keys = [`lead-${i}`];
      const { pages } = await grpc(leader).batchAllocate({ namespace: "r", rank: 0, keys });
      let position = "";
      await grpc(leader).confirmWrite({ namespace: "r", rank: 0, keys, pages }, { onHeader: (h) => (position = h.get(LOG_POSITION) ?? "") });
      expect(Number(position)).toBeGreaterThan(0);
      let answeredAt = "";
      const { exists } = await grpc(standby).batchExists(
        { namespace: "r", keys },
        { headers: { [MIN_POSITION]: position }, onHeader: (h) => (answeredAt = h.get(LOG_POSITION) ?? "") },
      );
      expect(exists).toEqual([true]);
      expect(Number(answeredAt)).toBeGreaterThanOrEqual(Number(position));
    }
    // A position the log has not reached: the standby waits the lag for it, then passes the read to the leader.
    const was = await readCounts(standby);
    await grpc(standby).batchExists({ namespace: "r", keys: ["lead-0"] }, { headers: { [MIN_POSITION]: "1000000000" } });
    const now = await readCounts(standby);
    expect(now.local).toBe(was.local);
    expect(now.behind + now.lagging).toBe(was.behind + was.lagging + 1);
  }, 60_000);

  it("a standby paused past the lag (SIGSTOP for 2 s) never answers from where it stopped, and answers reads itself again once caught up", async () => {
    const { leader, standby } = await leaderAndStandby("p", 1_000);
    const before = await readCounts(standby);
    standby.process.child.kill("SIGSTOP");
    // Written while it sleeps: on waking, its state lacks them until it reads the log.
    const keys = Array.from({ length: 20 }, (_, i) => `while-paused-${i}`);
    const { pages } = await grpc(leader).batchAllocate({ namespace: "p", rank: 0, keys });
    await grpc(leader).confirmWrite({ namespace: "p", rank: 0, keys, pages });
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    // Sent while it sleeps: on waking it meets them, most often before etcd tells it where the log ends (then the
    // leader answers them), else once it applied that far (then it does). Either way, never from the state it slept with.
    const reads = Array.from({ length: 8 }, () => grpc(standby).batchExists({ namespace: "p", keys }));
    await new Promise((resolve) => setTimeout(resolve, 100));
    standby.process.child.kill("SIGCONT");
    for (const read of reads) expect((await read).exists.every(Boolean)).toBe(true);
    const woke = await readCounts(standby);
    expect(woke.lagging + woke.local - before.lagging - before.local).toBe(8);
    await untilLocal(standby, "p");
    const local = (await readCounts(standby)).local;
    expect((await grpc(standby).batchExists({ namespace: "p", keys })).exists.every(Boolean)).toBe(true);
    expect((await readCounts(standby)).local).toBe(local + 1);
  }, 60_000);

  it("a relay spreads reads over the caught-up members: the standbys answer most, and no reader through it reads before a write it acknowledged", async () => {
    const { leader, standbys, worker, scheduler } = await threeMembersAndRelay();
    await worker.initializeRank({ namespace: "s", rank: 0, numPages: 10_000, worldSize: 1 });
    for (const standby of standbys) await untilLocal(standby, "s");
    const before = await Promise.all(standbys.map(readCounts));
    for (let i = 0; i < 60; i++) {
      const keys = [`k${i}`];
      const { pages } = await worker.batchAllocate({ namespace: "s", rank: 0, keys });
      await worker.confirmWrite({ namespace: "s", rank: 0, keys, pages });
      // The scheduler's reads of everything written so far: never one missing.
      const written = Array.from({ length: i + 1 }, (_, k) => `k${k}`);
      expect((await scheduler.batchExists({ namespace: "s", keys: written })).exists.every(Boolean)).toBe(true);
      await scheduler.batchExists({ namespace: "s", keys: ["absent"] });
    }
    const after = await Promise.all(standbys.map(readCounts));
    const local = after.reduce((sum, c, i) => sum + c.local - before[i]!.local, 0);
    // 120 reads over 3 members in turn: the standbys' two thirds, answered by them after a brief wait for the write, or passed on.
    expect(local).toBeGreaterThan(40);
    // A read a standby refuses (a rank never initialized) comes back as its answer: the leader sees only the reads sent to it.
    const refusedAtLeader = async () => {
      const text = await (await fetch(`${leader.url}/metrics`)).text();
      return Number(/^hf3fs_metadata_calls_total\{method="BatchExists",code="failed_precondition"\} (\d+)$/m.exec(text)?.[1] ?? 0);
    };
    const refusedBefore = await refusedAtLeader();
    for (let i = 0; i < 6; i++) {
      await expect(scheduler.batchExists({ namespace: "s", keys: ["k0"], callerRank: 7 })).rejects.toThrow(/rank 7 of namespace "s" is not initialized/);
    }
    expect((await refusedAtLeader()) - refusedBefore).toBeLessThan(6);
  }, 60_000);

  it("while a leader killed -9 is replaced, the scheduler's reads through a relay go on at the standbys: none waits for the election", async () => {
    const { leader, standbys, worker, scheduler } = await threeMembersAndRelay();
    await worker.initializeRank({ namespace: "f", rank: 0, numPages: 1_000, worldSize: 1 });
    const keys = Array.from({ length: 64 }, (_, i) => `f${i}`);
    const { pages } = await worker.batchAllocate({ namespace: "f", rank: 0, keys });
    await worker.confirmWrite({ namespace: "f", rank: 0, keys, pages });
    for (const standby of standbys) await untilLocal(standby, "f");
    let electedAt = Number.POSITIVE_INFINITY;
    const elected = Promise.race(standbys.map((s) => s.process.logged("cluster: leading"))).then(() => (electedAt = performance.now()));
    // vLLM's scheduler, asking of the same prompt's blocks every 20 ms.
    const reads: { began: number; ended: number; found: boolean }[] = [];
    let stop = false;
    const asking = (async () => {
      while (!stop) {
        const began = performance.now();
        const { exists } = await scheduler.batchExists({ namespace: "f", keys });
        reads.push({ began, ended: performance.now(), found: exists.every(Boolean) });
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    })();
    await until(async () => reads.length >= 10, 10_000);
    await kill9(leader);
    const killedAt = performance.now();
    await elected;
    stop = true;
    await asking;
    // The election waits for the killed leader's lease (2 s): reads begun after the kill and answered before a standby
    // leads were answered without a leader. Reads held for the new leader would all end after it leads.
    const withoutLeader = reads.filter((r) => r.began >= killedAt && r.ended < electedAt);
    expect(withoutLeader.length).toBeGreaterThanOrEqual(5);
    expect(reads.every((r) => r.found)).toBe(true);
  }, 60_000);

  it("a relay in front of 2 shards spreads each shard's part of a read over that shard's caught-up members, and reads every write it acknowledged; a whole call naming another shard's position goes to the leader", async () => {
    const etcd = await startEtcdCluster(1);
    const args = (shard: number) => [...LAG, "--cluster-name", "split", "--shards", "2", "--shard", String(shard)];
    const shards = await Promise.all([0, 1].map((shard) => Promise.all([0, 1].map(() => startServer(etcd, undefined, args(shard))))));
    const leaders = await Promise.all(shards.map((members) => waitForLeader(members)));
    const standbys = shards.map((members, shard) => members.find((m) => m !== leaders[shard])!);
    const relay = await startChildRelay(["--upstream", shards.map((members) => members.map((m) => m.url).join(",")).join(";")]);
    const worker = createClient(MetadataService, createGrpcTransport({ baseUrl: relay.url }));
    const scheduler = createClient(MetadataService, createGrpcTransport({ baseUrl: relay.url }));
    await worker.initializeRank({ namespace: "t", rank: 0, numPages: 10_000, worldSize: 1 });
    // Each standby asked its shard's own part (as a relay sends it) until it answers itself.
    for (const standby of standbys) await untilLocal(standby, "t", { [SHARD_LOCAL_HEADER]: "1" });
    // The relay knows both members of each shard: a topology read while a member was not yet named is read again within seconds.
    const deadline = Date.now() + 5_000;
    const known = async () => ((await (await fetch(`${relay.url}/status.json`)).json()) as { shards?: { members: unknown[] }[] }).shards ?? [];
    for (let shards = await known(); shards.length !== 2 || !shards.every((shard) => shard.members.length === 2); shards = await known()) {
      if (Date.now() > deadline) throw new Error(`the relay still knows ${JSON.stringify(shards)}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    const before = await Promise.all(standbys.map(readCounts));
    const written: string[] = [];
    for (let i = 0; i < 40; i++) {
      const keys = [`a${i}`, `b${i}`, `c${i}`, `d${i}`];
      const { pages } = await worker.batchAllocate({ namespace: "t", rank: 0, keys });
      await worker.confirmWrite({ namespace: "t", rank: 0, keys, pages });
      written.push(...keys);
      // The scheduler's reads of every key written so far, on both shards, and of one never written.
      expect((await scheduler.batchExists({ namespace: "t", keys: [...written, "never"] })).exists).toEqual([...written.map(() => true), false]);
    }
    expect(new Set(written.map((key) => keyShard("t", key, 2))).size).toBe(2);
    const after = await Promise.all(standbys.map(readCounts));
    // 40 reads, each split in two parts, each shard's parts over its 2 members in turn: each standby took some itself.
    for (const [shard, counts] of after.entries()) expect(counts.local - before[shard]!.local, `shard ${shard}'s standby`).toBeGreaterThan(5);
    // A client that does not route writes whole calls at shard 0's leader and reads them, with the position it was given (shard 0's),
    // at shard 1's standby: that position is not shard 1's, so the standby passes the read to its leader, and every write is read.
    // Shard 1's log is first taken well past shard 0's, so that shard 0's positions are ones shard 1's standby applied long ago.
    const direct = (url: string) => createClient(MetadataService, createGrpcTransport({ baseUrl: url }));
    const positionAt = async (url: string, headers: Record<string, string> = {}) => {
      let position = 0;
      await direct(url).getStats({ namespace: "t" }, { headers, onHeader: (h) => (position = Number(h.get(LOG_POSITION))) });
      return position;
    };
    const ownKeys = Array.from({ length: 200 }, (_, i) => `own${i}`).filter((key) => keyShard("t", key, 2) === 1);
    for (const key of ownKeys) {
      if ((await positionAt(leaders[1]!.url, { [SHARD_LOCAL_HEADER]: "1" })) > (await positionAt(leaders[0]!.url, { [SHARD_LOCAL_HEADER]: "1" })) + 40) break;
      await direct(leaders[1]!.url).batchAllocate({ namespace: "t", rank: 0, keys: [key] }, { headers: { [SHARD_LOCAL_HEADER]: "1" } });
    }
    for (let i = 0; i < 10; i++) {
      const keys = [`w${i}`, `x${i}`, `y${i}`, `z${i}`];
      const { pages } = await direct(leaders[0]!.url).batchAllocate({ namespace: "t", rank: 0, keys });
      let position = "";
      await direct(leaders[0]!.url).confirmWrite({ namespace: "t", rank: 0, keys, pages }, { onHeader: (h) => (position = h.get(LOG_POSITION) ?? "") });
      const { exists } = await direct(standbys[1]!.url).batchExists({ namespace: "t", keys }, { headers: { [MIN_POSITION]: position } });
      expect(exists).toEqual(keys.map(() => true));
    }
    const passed = (await readCounts(standbys[1]!)).behind - after[1]!.behind;
    expect(passed).toBe(10);
  }, 90_000);

  /** ENGINES are the engines' own calls, each with its read (the relay's method name) and the namespace it reads. */
  const ENGINES: [string, (url: string) => Promise<Engine>, string, string][] = [
    [
      "vLLM's own calls through a relay (a scheduler asking BatchExists, two TP workers writing, each its own session)",
      (url) => VllmEngine.start(url, 2, 65_536, 0.02),
      "vllm.batch_exists",
      DEFAULT_NAMESPACE,
    ],
    [
      "SGLang's own calls through a relay (per TP rank a writer, and a prefetcher asking exists, then the pages of those that exist)",
      async (url) => SglangEngine.start(url, 2, 65_536, 0.02),
      "sglang.exists",
      "kv",
    ],
  ];
  for (const [engineCalls, start, read, namespace] of ENGINES) {
    it(`${engineCalls}: no error, and the standbys answer most reads`, async () => {
      const etcd = await startEtcdCluster(1);
      const servers = await Promise.all([0, 1, 2].map(() => startServer(etcd, undefined, LAG)));
      const leader = await waitForLeader(servers);
      const standbys = servers.filter((s) => s !== leader);
      const relay = await startChildRelay(["--upstream", servers.map((s) => s.url).join(",")]);
      // Past the first reads of a quiet spell, which go to the leader while a standby learns where it stands.
      for (const standby of standbys) await untilLocal(standby, namespace);
      const before = await Promise.all(standbys.map(readCounts));
      const reads = async () => {
        const text = await (await fetch(`${relay.url}/metrics`)).text();
        return Number(new RegExp(`^hf3fs_relay_calls_total\\{method="${read}",code="ok"\\} (\\d+)$`, "m").exec(text)?.[1] ?? 0);
      };
      const readsBefore = await reads();
      const engine = await start(relay.url);
      for (let i = 0; i < 4; i++) await engine.progress(10);
      const { errors, stored } = await engine.stop();
      expect(errors).toEqual([]);
      expect(stored).toBeGreaterThan(30);
      const after = await Promise.all(standbys.map(readCounts));
      const local = after.reduce((sum, c, i) => sum + c.local - before[i]!.local, 0);
      const asked = (await reads()) - readsBefore;
      console.log(`${read} through a relay: ${asked} asked, ${local} answered by the standbys`);
      expect(asked).toBeGreaterThan(0);
      // The standbys in turn, the leader spared: a read goes to the leader only when a standby does not hold it within the lag.
      expect(local).toBeGreaterThan(asked * 0.75);
    }, 90_000);
  }

  it("every answer is the log's state at the position it names (a checker replays the log), and no standby answers from further behind than the lag", async () => {
    const etcd = await startEtcdCluster(3);
    // Standbys that refuse what they do not answer themselves: every answer from a standby is its own, read at its position.
    // The leader and one standby talk to two etcd members; the other standby to the third alone, paused below: a follower
    // of etcd's, since pausing etcd's own leader would stall every member (and the writer) until they elected another.
    const args = (endpoints: string) => [...LAG, "--standby-calls", "refuse", "--etcd-endpoints", endpoints];
    const silent = await etcdFollower(etcd);
    const others = etcd.members.filter((m) => m !== silent).map((m) => m.clientUrl);
    const leader = await startServer(etcd, undefined, args(others.join(",")));
    await waitForLeader([leader]);
    const standbys = await Promise.all([startServer(etcd, undefined, args(others.join(","))), startServer(etcd, undefined, args(silent.clientUrl))]);
    const servers = [leader, ...standbys];
    await grpc(leader).initializeRank({ namespace: "c", rank: 0, numPages: 100_000, worldSize: 1 });
    for (const standby of standbys) await untilLocal(standby, "c");

    // The writer: keys k0, k1, ... allocated and confirmed on the leader, every third step the oldest four deleted.
    // acks are the positions acknowledged to it, with when (this process's clock).
    const acks: { at: number; position: number }[] = [];
    let written = 0;
    let deleted = 0;
    const positionOf = (h: Headers) => Number(h.get(LOG_POSITION));
    const writer = (async () => {
      for (let step = 0; step < 150; step++) {
        const keys = [0, 1, 2, 3].map((i) => `k${written + i}`);
        const { pages } = await grpc(leader).batchAllocate({ namespace: "c", rank: 0, keys });
        await grpc(leader).confirmWrite(
          { namespace: "c", rank: 0, keys, pages },
          { onHeader: (h) => acks.push({ at: performance.now(), position: positionOf(h) }) },
        );
        written += 4;
        if (step % 3 === 2) {
          const old = [0, 1, 2, 3].map((i) => `k${deleted + i}`);
          await grpc(leader).deleteKeys({ namespace: "c", keys: old }, { onHeader: (h) => acks.push({ at: performance.now(), position: positionOf(h) }) });
          deleted += 4;
        }
      }
    })();
    // Readers on every member at once, each read of keys around the writer's front: deleted, complete, and not yet written.
    interface Read {
      keys: string[];
      exists: boolean[];
      position: number;
      standby: boolean;
      /** acked is the highest position acknowledged to the writer before the read was sent; ackedLagAgo, before the lag. */
      acked: number;
      ackedLagAgo: number;
    }
    const reads: Read[] = [];
    let refused = 0;
    let done = false;
    void writer.finally(() => (done = true));
    const highestBefore = (t: number) => acks.reduce((max, a) => (a.at < t ? Math.max(max, a.position) : max), 0);
    const read = async (member: Server) => {
      const keys = Array.from({ length: 8 }, () => `k${Math.max(0, written - 24 + Math.floor(Math.random() * 32))}`);
      const sent = performance.now();
      const acked = highestBefore(sent);
      const ackedLagAgo = highestBefore(sent - 1_000);
      let position = 0;
      try {
        const { exists } = await grpc(member).batchExists({ namespace: "c", keys }, { onHeader: (h) => (position = positionOf(h)) });
        reads.push({ keys, exists, position, standby: member !== leader, acked, ackedLagAgo });
      } catch (error) {
        expect(ConnectError.from(error).code).toBe(Code.Unavailable); // NOT_LEADER: a standby not known to hold the log within the lag
        refused++;
      }
    };
    const reader = async (member: Server) => {
      while (!done) await read(member);
    };
    // Halfway, the etcd member the second standby reads the log from stops for 1.5 s (SIGSTOP): the standby runs on, its
    // state frozen, while the leader goes on writing; once the lag has passed it must not answer from that state.
    const pause = (async () => {
      await new Promise((resolve) => setTimeout(resolve, 600));
      silent.process!.kill("SIGSTOP");
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      silent.process!.kill("SIGCONT");
    })();
    await Promise.all([writer, pause, ...servers.map(reader)]);

    const universe = Array.from({ length: written + 8 }, (_, i) => `k${i}`); // the readers ask up to 8 past the writer's front
    const states = existsAtPositions(await readLog(etcd), "c", universe);
    const positions = [...states.keys()];
    const existsAt = (position: number, key: string) => states.get(position)![Number(key.slice(1))]!;
    let standbyReads = 0;
    for (const read of reads) {
      expect(states.has(read.position), `position ${read.position} is a group's end in the log`).toBe(true);
      // A standby's answer is the log's state at exactly its position; the leader's, at one between what it had
      // acknowledged when the read was sent and its position (writes applied meanwhile may show).
      const candidates = read.standby ? [read.position] : positions.filter((p) => p >= Math.min(read.acked, read.position) && p <= read.position);
      const matches = candidates.some((p) => read.keys.every((key, i) => existsAt(p, key) === read.exists[i]));
      expect(matches, `${read.standby ? "standby" : "leader"} read at ${read.position}: ${JSON.stringify(read)}`).toBe(true);
      // Every write acknowledged more than the lag before the read was sent is in the answer.
      expect(read.position).toBeGreaterThanOrEqual(read.ackedLagAgo);
      if (read.standby) standbyReads++;
    }
    // The check saw the standbys' answers, and the keys' whole lives: complete, then deleted.
    expect(standbyReads).toBeGreaterThan(50);
    expect(reads.some((r) => r.exists.some(Boolean)) && reads.some((r) => r.exists.some((e) => !e))).toBe(true);
    console.log(`checked ${reads.length} answers (${standbyReads} a standby's own); ${refused} reads refused by a standby`);
    expect(refused).toBeGreaterThan(0); // the standby cut off from etcd, once the lag had passed
  }, 90_000);
});
