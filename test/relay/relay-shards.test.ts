import { createClient, type Interceptor } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { describe, expect, it } from "vitest";
import { Health, HealthCheckResponse_ServingStatus as ServingStatus } from "../../gen/grpc/health/v1/health_pb.js";
import { MetadataService } from "../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { keyShard } from "../../src/core/shards.js";
import { SHARD_LOCAL_HEADER } from "../../src/protocol/headers.js";
import { relayOptions } from "../../src/relay/relay-options.js";
import { startChildRelay } from "../support/child-server.js";
import { lacking } from "../support/debian-packages.js";
import { startEtcdCluster } from "../support/etcd-cluster.js";
import { kill9, startServer, waitForLeader } from "../support/ha-cluster.js";
import { startTestRelay } from "../support/test-relay.js";
import { startTestServer } from "../support/test-server.js";
import { VllmWorker } from "../support/vllm-worker.js";

const missingCluster = lacking("the sharded cluster's test", "etcd", "requests");

const KEYS = Array.from({ length: 40 }, (_, i) => `block-${i}`);

/** post sends a JSON route's body and answers its status and body. */
async function post(url: string, path: string, body: object): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(url + path, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

describe("a relay in front of a cluster of shards (--upstream with a member list per shard, ';' between them)", () => {
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

  it("refuses an --upstream that names no server for a shard, or an SRV name among shards", () => {
    expect(() => relayOptions({ upstream: "http://a:1;" })).toThrow(/names no server of shard 1/);
    expect(() => relayOptions({ upstream: "srv+http://_grpc._tcp.x;http://a:1" })).toThrow(/one SRV name, of a cluster of one shard/);
    expect(relayOptions({ upstream: "http://a:1,http://b:1;http://c:1" }).upstream).toBe("http://a:1,http://b:1;http://c:1");
  });
});

describe.skipIf(missingCluster !== "")("an unmodified vLLM client through a relay in front of 2 shards of 2 members each", () => {
  it("kill -9 of each shard's leader in turn, not restarted: no error, nothing confirmed lost, each shard's pages its own", async () => {
    const etcd = await startEtcdCluster(3);
    const shards = await Promise.all(
      [0, 1].map((shard) =>
        Promise.all([0, 1].map(() => startServer(etcd, undefined, ["--cluster-name", "sharded", "--shards", "2", "--shard", String(shard)]))),
      ),
    );
    const leaders = await Promise.all(shards.map((members) => waitForLeader(members)));
    const relay = await startChildRelay(["--upstream", shards.map((members) => members.map((m) => m.url).join(",")).join(";"), "--port", "0"]);
    const worker = VllmWorker.start(relay.url, 2, 4_096, 0);
    await worker.progress(5);
    for (const [shard, members] of shards.entries()) {
      await kill9(leaders[shard]!);
      leaders[shard] = await waitForLeader(members);
      await worker.progress(5);
    }
    const summary = await worker.stop();
    console.log(`vLLM-policy worker through a relay, 2 shards, each shard's leader killed: ${JSON.stringify({ ...summary, errors: summary.errors.length })}`);
    expect(summary.errors).toEqual([]);
    expect(summary.lost).toBe(0);
    // Each shard's leader holds its own pages only (p mod 2 = shard), and together they hold what the relay says.
    // (A member answers for the whole cluster; asked as another shard's leader asks it, it answers for its shard alone.)
    const total = createClient(MetadataService, createGrpcTransport({ baseUrl: relay.url }));
    const [all] = (await total.getStats({})).namespaces;
    let used = 0;
    const alone: Interceptor = (next) => (req) => {
      req.header.set(SHARD_LOCAL_HEADER, "1");
      return next(req);
    };
    for (const leader of leaders) {
      const direct = createClient(MetadataService, createGrpcTransport({ baseUrl: leader.url, interceptors: [alone] }));
      const [part] = (await direct.getStats({})).namespaces;
      for (const rank of part!.ranks) expect(rank.freePages + rank.reservedPages + rank.usedPages).toBe(2_048); // half of the 4,096 pages each
      used += part!.ranks.reduce((sum, r) => sum + r.usedPages, 0);
    }
    expect(all!.ranks.reduce((sum, r) => sum + r.usedPages, 0)).toBe(used);
    expect(used).toBeGreaterThan(0);
  }, 180_000);
});

describe.skipIf(missingCluster !== "")("any member of a cluster of 2 shards, called straight (no relay)", () => {
  it("routes the keys of the other shard to its leader: the vLLM-policy worker at one member sees no error while the other shard's leader is killed", async () => {
    const etcd = await startEtcdCluster(3);
    const shards = await Promise.all(
      [0, 1].map((shard) =>
        Promise.all([0, 1].map(() => startServer(etcd, undefined, ["--cluster-name", "direct", "--shards", "2", "--shard", String(shard)]))),
      ),
    );
    await Promise.all(shards.map((members) => waitForLeader(members)));
    // The worker calls a member of shard 1 (leader or standby: a standby forwards to its leader, which routes).
    const worker = VllmWorker.start(shards[1]![0]!.url, 2, 4_096, 0);
    await worker.progress(5);
    await kill9(await waitForLeader(shards[0]!));
    await waitForLeader(shards[0]!);
    await worker.progress(5);
    const summary = await worker.stop();
    console.log(`vLLM-policy worker at a member of shard 1, shard 0's leader killed: ${JSON.stringify({ ...summary, errors: summary.errors.length })}`);
    expect(summary.errors).toEqual([]);
    expect(summary.lost).toBe(0);
    // Any member answers for the whole cluster: shard 0's new leader reports every key, its own and shard 1's.
    const leader0 = createClient(MetadataService, createGrpcTransport({ baseUrl: (await waitForLeader(shards[0]!)).url }));
    const leader1 = createClient(MetadataService, createGrpcTransport({ baseUrl: (await waitForLeader(shards[1]!)).url }));
    const [fromZero] = (await leader0.getStats({})).namespaces;
    const [fromOne] = (await leader1.getStats({})).namespaces;
    expect(Number(fromZero!.keys)).toBeGreaterThan(0);
    expect(Number(fromZero!.keys)).toBe(Number(fromOne!.keys));
    expect(fromZero!.ranks.map((r) => r.usedPages)).toEqual(fromOne!.ranks.map((r) => r.usedPages));
  }, 180_000);
});
