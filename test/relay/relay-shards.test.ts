import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { describe, expect, it } from "vitest";
import { Health, HealthCheckResponse_ServingStatus as ServingStatus } from "../../gen/grpc/health/v1/health_pb.js";
import { ClusterService } from "../../gen/hf3fs/metadata/v1/cluster_pb.js";
import { MetadataService } from "../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { keyShard } from "../../src/core/shards.js";
import { relayOptions } from "../../src/relay/relay-options.js";
import { runCli, startChildRelay } from "../support/child-server.js";
import { lacking } from "../support/debian-packages.js";
import { VllmWorker } from "../support/engine-clients.js";
import { startEtcdCluster } from "../support/etcd-cluster.js";
import { kill9, startServer, waitForLeader } from "../support/ha-cluster.js";
import { pause } from "../support/pause.js";
import { tempDir } from "../support/temp-dir.js";
import { startTestRelay } from "../support/test-relay.js";
import { freePort, startTestServer } from "../support/test-server.js";
import { alone } from "../support/test-shards.js";
import { until } from "../support/until.js";

const missingCluster = lacking("the sharded cluster's test", "etcd", "requests");

const KEYS = Array.from({ length: 40 }, (_, i) => `block-${i}`);

/** post sends a JSON route's body and answers its status and body. */
async function post(url: string, path: string, body: object): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(url + path, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

describe("a relay in front of a cluster of shards (--upstream with a member list per shard, ';' between them)", () => {
  it("reports its upstream reachable (hf3fs_relay_upstream_reachable 1) only while it reaches every shard", async () => {
    const first = await startTestServer({ shards: 2, shard: 0 });
    const port = await freePort();
    const relay = await startTestRelay(`${first.url};http://127.0.0.1:${port}`, { holdMs: 10_000 });
    const reachable = async () => /^hf3fs_relay_upstream_reachable (\d)$/m.exec(await (await fetch(`${relay.url}/metrics`)).text())?.[1];
    // A call on shard 0's keys alone is answered: shard 0 is reached, shard 1 not yet.
    const key = KEYS.find((k) => keyShard("m", k, 2) === 0)!;
    expect((await post(relay.url, "/keys/batch_exists", { namespace: "m", keys: [key] })).status).toBe(200);
    expect(await reachable()).toBe("0");
    await startTestServer({ shards: 2, shard: 1 }, undefined, port);
    await until(async () => (await reachable()) === "1");
  });

  it("places each key on its shard and its page among the shard's own, and answers as one server", async () => {
    const shards = await Promise.all([0, 1].map((shard) => startTestServer({ shards: 2, shard })));
    const relay = await startTestRelay(shards.map((s) => s.url).join(";"));
    const client = createClient(MetadataService, createGrpcTransport({ baseUrl: relay.url }));

    const init = await client.initializeRank({ namespace: "m", rank: 0, numPages: 64, worldSize: 1 });
    expect([init.created, init.numPages, init.freePages]).toEqual([true, 64, 64]);
    const { pages, statuses } = await client.batchAllocate({ namespace: "m", rank: 0, keys: KEYS });
    // Page p belongs to shard p mod 2, the shard of its key; no page twice.
    for (const [i, key] of KEYS.entries()) expect(pages[i]! % 2).toBe(keyShard("m", key, 2));
    expect(new Set(pages).size).toBe(KEYS.length);
    expect(statuses.every((s) => s === 1)).toBe(true);
    const confirmed = await client.confirmWrite({ namespace: "m", rank: 0, keys: KEYS, pages });
    expect([confirmed.confirmed, confirmed.completed]).toEqual([KEYS.length, KEYS.map((_, i) => i)]);
    expect((await client.getLocations({ namespace: "m", rank: 0, keys: KEYS })).pages).toEqual(pages);

    // Each shard's server holds its keys alone.
    for (const [shard, server] of shards.entries()) {
      const direct = createClient(MetadataService, createGrpcTransport({ baseUrl: server.url }));
      expect((await direct.batchExists({ namespace: "m", keys: KEYS })).exists).toEqual(KEYS.map((key) => keyShard("m", key, 2) === shard));
    }
    // vLLM's JSON routes, through the relay, see one server.
    const exists = await post(relay.url, "/keys/batch_exists", { namespace: "m", keys: [...KEYS, "none"] });
    expect(exists).toEqual({ status: 200, body: { exists: [...KEYS.map(() => true), false] } });
    const [stats] = (await client.getStats({ namespace: "m" })).namespaces;
    expect([Number(stats!.keys), stats!.ranks[0]!.numPages, stats!.ranks[0]!.freePages, stats!.ranks[0]!.usedPages]).toEqual([
      KEYS.length,
      64,
      64 - KEYS.length,
      KEYS.length,
    ]);
    const deleted = await client.deleteKeys({ namespace: "m", keys: KEYS.slice(0, 10) });
    expect(deleted.deleted).toBe(10);
  });

  it("is healthy only while it reaches every shard", async () => {
    const shards = await Promise.all([0, 1].map((shard) => startTestServer({ shards: 2, shard })));
    const relay = await startTestRelay(shards.map((s) => s.url).join(";"));
    const health = createClient(Health, createGrpcTransport({ baseUrl: relay.url }));
    const status = async (want: ServingStatus) => {
      for (const stream = health.watch({ service: MetadataService.typeName }); ; ) for await (const answer of stream) if (answer.status === want) return;
    };
    await status(ServingStatus.SERVING);
    await shards[1]!.close();
    await status(ServingStatus.NOT_SERVING);
  });

  it("answers the keys of a shard whose server is gone as misses after --read-hold (hf3fs-unreached), the other shard's as its server does", async () => {
    const shards = await Promise.all([0, 1].map((shard) => startTestServer({ shards: 2, shard })));
    const relay = await startTestRelay(shards.map((s) => s.url).join(";"), { holdMs: 60_000, readHoldMs: 300 });
    const client = createClient(MetadataService, createGrpcTransport({ baseUrl: relay.url }));
    await client.initializeRank({ namespace: "m", rank: 0, numPages: 64, worldSize: 1 });
    const { pages } = await client.batchAllocate({ namespace: "m", rank: 0, keys: KEYS });
    await client.confirmWrite({ namespace: "m", rank: 0, keys: KEYS, pages });
    await shards[1]!.close();
    const res = await fetch(`${relay.url}/keys/batch_exists`, { method: "POST", body: JSON.stringify({ namespace: "m", keys: KEYS }) });
    expect(res.headers.get("hf3fs-unreached")).toBe("1");
    expect(await res.json()).toEqual({ exists: KEYS.map((key) => keyShard("m", key, 2) === 0) });
    // A read of shard 0's keys alone is its server's answer.
    const ofShard0 = KEYS.filter((key) => keyShard("m", key, 2) === 0);
    const whole = await fetch(`${relay.url}/keys/batch_exists`, { method: "POST", body: JSON.stringify({ namespace: "m", keys: ofShard0 }) });
    expect([whole.headers.get("hf3fs-unreached"), await whole.json()]).toEqual([null, { exists: ofShard0.map(() => true) }]);
  });

  it("refuses an --upstream that names no server for a shard, or an SRV name among shards", () => {
    expect(() => relayOptions({ upstream: "http://a:1;" })).toThrow(/names no server of shard 1/);
    expect(() => relayOptions({ upstream: "srv+http://_grpc._tcp.x;http://a:1" })).toThrow(/one SRV name, of a cluster of one shard/);
    expect(relayOptions({ upstream: "http://a:1,http://b:1;http://c:1" }).upstream).toBe("http://a:1,http://b:1;http://c:1");
  });
});

/** relayShards reads the shards a relay sends to from its status page's data: each shard's leader URL ("" while none is known). */
async function relayShards(url: string): Promise<string[]> {
  const status = (await (await fetch(`${url}/status.json`)).json()) as { shards?: { members: { url: string; leader: boolean }[] }[] };
  return (status.shards ?? []).map((shard) => shard.members.find((m) => m.leader)?.url ?? "");
}

describe.skipIf(missingCluster !== "")("unmodified vLLM clients in front of 2 shards of 3 members each: through 2 relays, and straight at a member", () => {
  it("kill -9 of each shard's leader in turn, not restarted: no error, nothing confirmed lost, each shard's pages its own; the relays follow the topology", async () => {
    const etcd = await startEtcdCluster(3);
    const cluster = ["--cluster-name", "sharded"];
    // Started as deploy/kubernetes's StatefulSet starts them: members 0 to 5 by their index, member i in shard i mod 2.
    const members = await Promise.all([0, 1, 2, 3, 4, 5].map((i) => startServer(etcd, undefined, [...cluster, "--shards", "2", "--member-index", String(i)])));
    const shards = [0, 1].map((shard) => members.filter((_, i) => i % 2 === shard));
    const leaders = await Promise.all(shards.map((members) => waitForLeader(members)));
    const urls = shards.map((members) => members.map((m) => m.url));

    // Every member answers the topology: 2 shards, 3 members each, the leaders the health checks found.
    const topologyAt = (url: string) => createClient(ClusterService, createGrpcTransport({ baseUrl: url })).getTopology({});
    await until(async () => {
      const answers = await Promise.all(urls.flat().map(topologyAt));
      return answers.every(
        (t) =>
          t.shardCount === 2 &&
          t.shards.every(
            (s, i) => s.members.length === 3 && s.members[0]!.leader && s.members[0]!.url === leaders[i]!.url && s.members.filter((m) => m.leader).length === 1,
          ),
      );
    });
    // Each member's metrics name the shard of its index: its cluster's series are that shard's alone.
    for (const [i, member] of members.entries()) {
      const metrics = await (await fetch(`${member.url}/metrics`)).text();
      const leads = leaders.includes(member) ? 1 : 0;
      expect(metrics).toMatch(new RegExp(`^hf3fs_metadata_cluster_leader\\{shard="${i % 2}"\\} ${leads}$`, "m"));
      const shardsNamed = new Set([...metrics.matchAll(/^hf3fs_metadata_cluster_member_applied_seq\{shard="(\d+)"/gm)].map((m) => m[1]));
      expect([...shardsNamed]).toEqual([String(i % 2)]);
    }
    // A member started with another number of shards is refused, naming both.
    const refused = await runCli([
      "serve",
      "--data-dir",
      tempDir(),
      "--etcd-endpoints",
      etcd.endpoints,
      "--port",
      "0",
      ...cluster,
      "--shards",
      "3",
      "--shard",
      "0",
    ]);
    expect([refused.code, refused.stderr]).toEqual([1, expect.stringMatching(/--shards 3 does not match cluster "sharded" in etcd, split into 2 shards/)]);

    // Relay A is told every shard's members; relay B one member of shard 1, and learns the rest from the topology.
    const relayA = await startChildRelay(["--upstream", urls.map((members) => members.join(",")).join(";"), "--port", "0"]);
    const relayB = await startChildRelay(["--upstream", urls[1]![1]!, "--port", "0"]);
    const learned = await until(async () => JSON.stringify(await relayShards(relayB.url)) === JSON.stringify(leaders.map((l) => l.url)));
    console.log(`relay B, told one member, sends to both shards' leaders ${learned} ms after it listened`);

    // The third worker calls a member of shard 1 that does not lead it: a standby forwards to its leader, which routes.
    const straight = shards[1]!.find((m) => m !== leaders[1])!;
    const workers = [VllmWorker.start(relayA.url, 2, 4_096, 0), VllmWorker.start(relayB.url, 2, 4_096, 0), VllmWorker.start(straight.url, 2, 4_096, 0)];
    const progress = () => Promise.all(workers.map((w) => w.progress(4)));
    await progress();
    const killedUrls: string[] = [];
    for (const [shard, members] of shards.entries()) {
      const killed = leaders[shard]!;
      killedUrls.push(killed.url);
      await kill9(killed);
      // Its data dir says whose it is, and counts its part of each rank's pages.
      expect((await runCli(["inspect", "--data-dir", killed.dataDir])).stdout).toMatch(new RegExp(`member id [0-9a-f-]{36}  shard ${shard} of 2\n`));
      leaders[shard] = await waitForLeader(members);
      const followed = await until(async () => (await relayShards(relayB.url))[shard] === leaders[shard]!.url);
      console.log(`relay B names shard ${shard}'s new leader ${followed} ms after the health checks found it`);
      await progress();
    }
    const summaries = await Promise.all(workers.map((w) => w.stop()));
    for (const [i, summary] of summaries.entries()) {
      console.log(
        `vLLM-policy worker ${["via relay A", "via relay B", "at a member"][i]}, each shard's leader killed: ${JSON.stringify({ ...summary, errors: summary.errors.length })}`,
      );
      expect(summary.errors).toEqual([]);
      expect(summary.lost).toBe(0);
    }

    // status, and a member's status page, show both shards and their leaders: the leaders of now, as the members'
    // health says. status reads etcd's leader keys (a member reads them each second) and health asks each member, so
    // the two agree once no shard is mid-election: on 2 busy cores a lease may lapse and a shard elect again between
    // the two looks, so the test looks again until they agree, and fails if they never do.
    let shown: { status: unknown; page: (string | undefined)[] } = { status: undefined, page: [] };
    const agreed = await until(async () => {
      for (const [shard, members] of shards.entries()) leaders[shard] = await waitForLeader(members);
      const status = await runCli(["status", "--server", straight.url, "--json"]);
      const page = (await (await fetch(`${straight.url}/status.json`)).json()) as { shards: { members: { url: string; leader: boolean }[] }[] };
      shown = { status: JSON.parse(status.stdout).shards, page: page.shards.map((shard) => shard.members.find((m) => m.leader)?.url) };
      const now = leaders.map((leader) => leader.url);
      return (
        JSON.stringify((shown.status as { leader: string }[]).map((s) => s.leader)) === JSON.stringify(now) &&
        JSON.stringify(shown.page) === JSON.stringify(now)
      );
    }, 30_000).catch(() => "never");
    console.log(`status and the status page agree with the members' health on each shard's leader after ${agreed} ms`);
    expect(shown.status).toEqual(leaders.map((leader, shard) => ({ shard, leader: leader.url, members: expect.any(Array) })));
    expect(shown.page).toEqual(leaders.map((leader) => leader.url));
    // status asks each shard's own cluster: at a member of shard 1, it names shard 0's killed leader as down too, and exits 1.
    await until(async () => {
      const status = await runCli(["status", "--server", straight.url, "--json"]);
      const { problems } = JSON.parse(status.stdout) as { problems: string[] };
      return status.code === 1 && problems.includes("1 member(s) down") && problems.includes("shard 0: 1 member(s) down");
    }, 30_000);
    // So does its status page: every shard's members, each shard's killed leader down among them and its new one leading.
    type Line = { url: string; role: string };
    await until(async () => {
      const page = (await (await fetch(`${straight.url}/status.json`)).json()) as { shards: { lines: Line[] }[] };
      const roles = page.shards.map((s) => Object.fromEntries(s.lines.map((m) => [m.url, m.role])));
      return roles.every((r, shard) => r[killedUrls[shard]!] === "down" && r[leaders[shard]!.url] === "leader" && Object.keys(r).length === 3);
    }, 30_000);

    // A call of shard 1's keys sent to shard 0's leader is answered right: the keys land on shard 1 alone.
    const misrouted = KEYS.filter((key) => keyShard("misrouted", key, 2) === 1);
    const atZero = createClient(MetadataService, createGrpcTransport({ baseUrl: leaders[0]!.url }));
    await atZero.initializeRank({ namespace: "misrouted", rank: 0, numPages: 64, worldSize: 1 });
    const { pages } = await atZero.batchAllocate({ namespace: "misrouted", rank: 0, keys: misrouted });
    expect(pages.every((page) => page % 2 === 1)).toBe(true);
    await atZero.confirmWrite({ namespace: "misrouted", rank: 0, keys: misrouted, pages });
    const own = (url: string) => createClient(MetadataService, createGrpcTransport({ baseUrl: url, interceptors: [alone] }));
    expect((await own(leaders[1]!.url).batchExists({ namespace: "misrouted", keys: misrouted })).exists.every(Boolean)).toBe(true);
    expect((await own(leaders[0]!.url).batchExists({ namespace: "misrouted", keys: misrouted })).exists.some(Boolean)).toBe(false);

    // Each shard's leader holds its own pages only (p mod 2 = shard), and together they hold what the relays say.
    const [all] = (await createClient(MetadataService, createGrpcTransport({ baseUrl: relayB.url })).getStats({ namespace: "" })).namespaces;
    let used = 0;
    for (const leader of leaders) {
      const [part] = (await own(leader.url).getStats({ namespace: "" })).namespaces;
      for (const rank of part!.ranks) expect(rank.freePages + rank.reservedPages + rank.usedPages).toBe(2_048); // half of the 4,096 pages each
      used += part!.ranks.reduce((sum, r) => sum + r.usedPages, 0);
    }
    expect(all!.ranks.reduce((sum, r) => sum + r.usedPages, 0)).toBe(used);
    expect(used).toBeGreaterThan(0);
  }, 240_000);
});

describe.skipIf(missingCluster !== "")("a cluster of 3 shards, each on an etcd cluster of its own (--shard-etcd-endpoints)", () => {
  it("routes across them: a worker at a member of shard 1 sees no error, and every member names every shard's leader", async () => {
    const etcds = [await startEtcdCluster(1), await startEtcdCluster(1), await startEtcdCluster(1)];
    const shardEtcd = etcds.map((etcd) => etcd.endpoints).join(";");
    const args = (shard: number) => ["--cluster-name", "apart", "--shards", "3", "--shard", String(shard), "--shard-etcd-endpoints", shardEtcd];
    const shards = await Promise.all([0, 1, 2].map((shard) => Promise.all([0, 1].map(() => startServer(etcds[shard]!, undefined, args(shard))))));
    const leaders = await Promise.all(shards.map((members) => waitForLeader(members)));
    for (const member of shards.flat()) {
      await until(async () => {
        const topology = await createClient(ClusterService, createGrpcTransport({ baseUrl: member.url })).getTopology({});
        return JSON.stringify(topology.shards.map((s) => s.members.find((m) => m.leader)?.url)) === JSON.stringify(leaders.map((l) => l.url));
      });
    }
    const worker = VllmWorker.start(shards[1]![0]!.url, 2, 4_096, 0);
    await worker.progress(8);
    const summary = await worker.stop();
    expect(summary.errors).toEqual([]);
    expect(summary.lost).toBe(0);
    // Shard 0's keys are on shard 0's leader, which only etcd 0 knows.
    const [zero] = (await createClient(MetadataService, createGrpcTransport({ baseUrl: leaders[0]!.url, interceptors: [alone] })).getStats({})).namespaces;
    expect(zero!.ranks.reduce((sum, r) => sum + r.usedPages, 0)).toBeGreaterThan(0);

    // Every member of shard 2 gone: status at a member of shard 1 says so, and exits 1, once the leader's lease lapsed.
    for (const member of shards[2]!) await kill9(member);
    let last = { code: 0 as number | null, problems: [] as string[] };
    await until(async () => {
      const status = await runCli(["status", "--server", shards[1]![0]!.url, "--json"]);
      last = { code: status.code, problems: JSON.parse(status.stdout).problems };
      return last.problems.includes("shard 2: no leader");
    });
    expect(last.code).toBe(1);

    // Shard 2's etcd paused (SIGSTOP: it neither answers nor closes its connections): a member of shard 1 still
    // follows the shards it can read, so shard 0's next leader shows in its topology, and its status page
    // answers, saying shard 2's members were not read.
    const paused = etcds[2]!.members[0]!.process!;
    await pause(paused.pid!);
    try {
      await kill9(leaders[0]!);
      leaders[0] = await waitForLeader(shards[0]!.filter((m) => m !== leaders[0]));
      const at = shards[1]![0]!.url;
      const followed = await until(async () => {
        const topology = await createClient(ClusterService, createGrpcTransport({ baseUrl: at })).getTopology({}, { timeoutMs: 5_000 });
        return topology.shards[0]!.members.find((m) => m.leader)?.url === leaders[0]!.url;
      }, 20_000);
      console.log(`with shard 2's etcd paused, a member of shard 1 names shard 0's new leader ${followed} ms after it was elected`);
      // Meanwhile it answers the topology within the second a relay gives each member to answer it, every time.
      for (let i = 0; i < 8; i++) {
        await createClient(ClusterService, createGrpcTransport({ baseUrl: at })).getTopology({}, { timeoutMs: 1_000 });
        await new Promise((resolve) => setTimeout(resolve, 500));
      }
      const page = (await (await fetch(`${at}/status.json`, { signal: AbortSignal.timeout(10_000) })).json()) as { shards: { unread?: string }[] };
      expect(page.shards.map((s) => s.unread !== undefined)).toEqual([false, false, true]);
    } finally {
      paused.kill("SIGCONT");
    }
  }, 180_000);
});
