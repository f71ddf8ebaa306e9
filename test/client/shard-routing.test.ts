import { createClient, type Transport } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { describe, expect, it } from "vitest";
import { AllocationStatus, MetadataService, Reason } from "../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { defaultRetryPolicy } from "../../src/client/backoff.js";
import { createMetadataClient, MetadataError } from "../../src/client/index.js";
import { LeaderFollowing } from "../../src/client/leader-following.js";
import { ShardLink } from "../../src/client/shard-link.js";
import { ShardRouting } from "../../src/client/shard-routing.js";
import { MetadataError as CoreError } from "../../src/core/errors.js";
import { keyShard } from "../../src/core/shards.js";
import { topologyOf } from "../../src/service/cluster-service.js";
import { FakeClock } from "../support/fake-clock.js";
import { startTestServer } from "../support/test-server.js";
import { alone } from "../support/test-shards.js";

const KEYS = Array.from({ length: 40 }, (_, i) => `block-${i}`);

/**
 * twoShards runs the two shards of a cluster as single nodes whose
 * topology names both, but which cannot route: a call's keys of the other
 * shard fail there. Only a client that routes by itself gets answers.
 */
async function twoShards(options: { reservationTtlMs?: number; maxKeysPerCall?: number } = {}) {
  const urls: string[] = [];
  const cannotRoute = () => async () => {
    throw new CoreError(Reason.UPSTREAM_UNAVAILABLE, "this test's shards do not route");
  };
  const servers = [];
  for (const shard of [0, 1]) {
    const topology = () => topologyOf({ count: 2, index: shard }, [[{ id: "a", url: urls[0]!, leader: true }], [{ id: "b", url: urls[1]!, leader: true }]]);
    const server = await startTestServer({ shards: 2, shard, ...options }, undefined, 0, { peers: { calls: cannotRoute, topology, close: () => undefined } });
    urls.push(server.url);
    servers.push(server);
  }
  return servers;
}

/** forget makes one shard forget a namespace (as a server that lost its state), through a call marked as its own part. */
async function forget(url: string, namespace: string): Promise<void> {
  await createClient(MetadataService, createGrpcTransport({ baseUrl: url, interceptors: [alone] })).resetNamespace({ namespace, force: true });
}

describe("the TypeScript client with route: true, in front of a cluster of shards", () => {
  it("sends each shard its part and merges the answers as one server gives them", async () => {
    const [zero] = await twoShards();
    const client = createMetadataClient({ baseUrl: zero!.url, route: true });
    const init = await client.initializeRank({ namespace: "m", rank: 0, numPages: 64, worldSize: 1 });
    expect([init.created, init.freePages]).toEqual([true, 64]);
    const { pages, statuses } = await client.batchAllocate({ namespace: "m", rank: 0, keys: KEYS });
    for (const [i, key] of KEYS.entries()) expect(pages[i]! % 2).toBe(keyShard("m", key, 2));
    expect(statuses.every((s) => s === AllocationStatus.NEW)).toBe(true);
    const confirmed = await client.confirmWrite({ namespace: "m", rank: 0, keys: KEYS, pages });
    expect([confirmed.confirmed, confirmed.completed]).toEqual([KEYS.length, KEYS.map((_, i) => i)]);
    expect((await client.batchExists({ namespace: "m", keys: [...KEYS, "none"] })).exists).toEqual([...KEYS.map(() => true), false]);
    expect((await client.getLocations({ namespace: "m", rank: 0, keys: KEYS })).pages).toEqual(pages);
    const [stats] = (await client.getStats({ namespace: "m" })).namespaces;
    expect([Number(stats!.keys), stats!.ranks[0]!.usedPages]).toEqual([KEYS.length, KEYS.length]);
  });

  it("refuses a bad call itself as one node refuses it, with the server's reason, field and message, and a MetadataError", async () => {
    const [[zero], node] = await Promise.all([twoShards(), startTestServer()]);
    const [routed, plain] = [createMetadataClient({ baseUrl: zero!.url, route: true }), createMetadataClient({ baseUrl: node.url })];
    for (const client of [routed, plain]) await client.initializeRank({ namespace: "m", rank: 0, numPages: 64, worldSize: 1 });
    const refusal = (call: Promise<unknown>) =>
      call.then(
        () => undefined,
        (error) => (error instanceof MetadataError ? { reason: error.reason, field: error.info?.field, message: error.rawMessage } : error),
      );
    const bad = [
      (c: typeof plain) => c!.batchAllocate({ namespace: "m", rank: 0, keys: [...KEYS.slice(0, 5), "", ...KEYS.slice(5)] }),
      (c: typeof plain) => c!.confirmWrite({ namespace: "m", rank: 0, keys: KEYS, pages: [1, 2] }),
      (c: typeof plain) => c!.confirmWrite({ namespace: "m", rank: 0, pagesToRelease: [4, -1], keysToRelease: ["a", "b"] }),
    ];
    for (const call of bad) {
      const expected = await refusal(call(plain));
      expect(expected).toHaveProperty("reason");
      expect(await refusal(call(routed))).toEqual(expected);
    }
  });

  it("holds a whole call to the limits the topology names, as one node does, though each shard's part is within them", async () => {
    const limits = { maxKeysPerCall: 30 };
    const [[zero], node] = await Promise.all([twoShards(limits), startTestServer(limits)]);
    const [routed, plain] = [createMetadataClient({ baseUrl: zero!.url, route: true }), createMetadataClient({ baseUrl: node.url })];
    for (const client of [routed, plain]) await client.initializeRank({ namespace: "m", rank: 0, numPages: 64, worldSize: 1 });
    const refusal = (call: Promise<unknown>) =>
      call.then(
        () => "answered",
        (error) => (error instanceof MetadataError ? { reason: error.reason, field: error.info?.field, message: error.rawMessage } : error),
      );
    // 40 keys: over the limit whole, within it on each shard (about 20 each).
    const calls = [
      (c: typeof plain) => c.batchExists({ namespace: "m", keys: KEYS }),
      (c: typeof plain) => c.batchAllocate({ namespace: "m", rank: 0, keys: KEYS }),
    ];
    for (const call of calls) {
      const expected = await refusal(call(plain));
      expect(expected).toMatchObject({ reason: Reason.LIMIT_EXCEEDED });
      expect(await refusal(call(routed))).toEqual(expected);
    }
  });

  it("checks a reset on every shard over the wire before any forgets: one that a shard refuses leaves the other's keys", async () => {
    const [zero, one] = await twoShards({ reservationTtlMs: 600_000 });
    const client = createMetadataClient({ baseUrl: zero!.url, route: true });
    await client.initializeRank({ namespace: "m", rank: 0, numPages: 64, worldSize: 1 });
    const [onZero, onOne] = [KEYS.filter((key) => keyShard("m", key, 2) === 0), KEYS.find((key) => keyShard("m", key, 2) === 1)!];
    const { pages } = await client.batchAllocate({ namespace: "m", rank: 0, keys: onZero });
    await client.confirmWrite({ namespace: "m", rank: 0, keys: onZero, pages });
    await client.batchAllocate({ namespace: "m", rank: 0, keys: [onOne] }); // left reserved on shard 1
    for (const server of [zero!, one!]) server.time.advance(60_000);
    await expect(client.resetNamespace({ namespace: "m" })).rejects.toMatchObject({ reason: Reason.WRITES_IN_FLIGHT });
    expect(Number((await client.getStats({ namespace: "m" })).namespaces[0]!.keys)).toBe(onZero.length);
  });

  it("is needed: without it, the same call fails at a member that cannot route", async () => {
    const [zero] = await twoShards();
    const client = createMetadataClient({ baseUrl: zero!.url, retry: { deadlineMs: 200 } });
    await client.initializeRank({ namespace: "m", rank: 0, numPages: 64, worldSize: 1 }).catch(() => undefined);
    await expect(client.batchAllocate({ namespace: "m", rank: 0, keys: KEYS })).rejects.toThrow(/do not route/);
  });

  it("initializes a rank again on the one shard that lost it, and the call goes through", async () => {
    const [zero, one] = await twoShards();
    const client = createMetadataClient({ baseUrl: zero!.url, route: true });
    await client.initializeRank({ namespace: "m", rank: 0, numPages: 64, worldSize: 1 });
    // Shard 1 forgets the namespace (as a server that lost its state): its part answers RANK_NOT_INITIALIZED once.
    await forget(one!.url, "m");
    const { pages } = await client.batchAllocate({ namespace: "m", rank: 0, keys: KEYS });
    expect(pages.every((page) => page >= 0)).toBe(true);
    const [stats] = (await client.getStats({ namespace: "m" })).namespaces;
    expect(stats!.ranks[0]!.reservedPages).toBe(KEYS.length);
  });

  it("gathers the parts of calls made at once into Batches, each call its own answer, a shard that lost a rank initialized again", async () => {
    const [zero, one] = await twoShards();
    const client = createMetadataClient({ baseUrl: zero!.url, route: true });
    await client.initializeRank({ namespace: "m", rank: 0, numPages: 256, worldSize: 1 });
    await forget(one!.url, "m");
    // Twenty calls at once of four keys each, one for a rank no one initialized: shard 1 answers its parts RANK_NOT_INITIALIZED first.
    const keysOf = (i: number) => Array.from({ length: 4 }, (_, k) => `call-${i}-${k}`);
    const answers = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        client.batchAllocate({ namespace: "m", rank: i === 7 ? 9 : 0, keys: keysOf(i) }).then(
          (r) => r.pages,
          (e: unknown) => (e as MetadataError).reason,
        ),
      ),
    );
    expect(answers[7]).toBe(Reason.RANK_NOT_INITIALIZED);
    const pages = answers.filter((_, i) => i !== 7).flat() as number[];
    expect(new Set(pages).size).toBe(19 * 4);
    for (const [i, answer] of answers.entries()) {
      if (i !== 7) for (const [k, page] of (answer as number[]).entries()) expect(page % 2).toBe(keyShard("m", keysOf(i)[k]!, 2));
    }
    const count = async (url: string, method: string) =>
      Number(new RegExp(`hf3fs_metadata_calls_total\\{method="${method}",code="ok"\\} (\\d+)`).exec(await (await fetch(`${url}/metrics`)).text())?.[1] ?? 0);
    expect((await count(zero!.url, "Batch")) + (await count(one!.url, "Batch"))).toBeGreaterThan(0);
  });

  it("calls a cluster of one shard as without it", async () => {
    const server = await startTestServer();
    const client = createMetadataClient({ baseUrl: server.url, route: true });
    await client.initializeRank({ rank: 0, numPages: 8, worldSize: 1 });
    expect((await client.batchAllocate({ rank: 0, keys: ["a"] })).statuses).toEqual([AllocationStatus.NEW]);
    await expect(client.batchAllocate({ rank: 9, keys: ["a"] })).rejects.toBeInstanceOf(MetadataError);
  });

  it("reads the topology again over the one connection it keeps to a member, not a new one each second", async () => {
    const [zero] = await twoShards();
    let made = 0;
    let answered = 0;
    // Each transport made is a connection; each topology answered is one read done.
    const transportFor = (url: string): Transport => {
      made++;
      const transport = createGrpcTransport({ baseUrl: url });
      return { unary: (...args) => transport.unary(...args).finally(() => answered++), stream: transport.stream };
    };
    const time = new FakeClock();
    const routing = new ShardRouting(
      [zero!.url],
      transportFor,
      (baseUrl) => new ShardLink(new LeaderFollowing({ baseUrl, transportFor, policy: defaultRetryPolicy, random: Math.random }), new Map(), () => undefined),
      time.clock,
    );
    expect(await routing.shards()).toBeDefined();
    for (let read = 2; read <= 5; read++) {
      time.advance(1_500);
      await routing.shards(); // a read older than a second starts another, which the call does not wait for
      while (answered < read) await new Promise((resolve) => setImmediate(resolve));
    }
    expect(made).toBe(1);
  });
});
