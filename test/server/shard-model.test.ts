import { type Client, createClient, type Interceptor } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { assertInvariants } from "../../bench/harness/invariants.js";
import { MetadataService } from "../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { MetadataError } from "../../src/client/metadata-error.js";
import type { StateOptions } from "../../src/core/options.js";
import { SHARD_LOCAL_HEADER } from "../../src/protocol/headers.js";
import { topologyOf } from "../../src/service/cluster-service.js";
import type { MetadataCalls } from "../../src/service/metadata-calls.js";
import { FakeClock } from "../support/fake-clock.js";
import { modelOf, OP, single, step } from "../support/shard-model.js";
import { startTestServer, type TestServer } from "../support/test-server.js";

const SHARDS = 3;

/** alone marks a call as one shard's leader sends another its part: answered there, not routed again. */
const alone: Interceptor = (next) => (req) => {
  req.header.set(SHARD_LOCAL_HEADER, "1");
  return next(req);
};

/** callsOf are MetadataCalls over gRPC through `client`; an error is the client's MetadataError, with the server's reason. */
function callsOf(client: Client<typeof MetadataService>): MetadataCalls {
  return (async (method, request, signal) => {
    try {
      return { response: await (client[method] as (r: unknown, o: object) => Promise<unknown>)(request, { signal }) };
    } catch (error) {
      throw MetadataError.of(error);
    }
  }) as MetadataCalls;
}

/**
 * cluster runs 3 shards as in-process servers over the network, each
 * routing the keys of the others to them (as a member routes to the
 * other shards' leaders, marked shard-local), each on a fake clock.
 */
async function cluster(limits: Partial<StateOptions> = {}): Promise<TestServer[]> {
  const urls: string[] = [];
  // A server asks for its ways to the others as it starts, before they listen: each is made at its first call.
  const peer = (shard: number): MetadataCalls => {
    let calls: MetadataCalls | undefined;
    return ((method, request, signal) => {
      calls ??= callsOf(createClient(MetadataService, createGrpcTransport({ baseUrl: urls[shard]!, interceptors: [alone] })));
      return calls(method, request, signal);
    }) as MetadataCalls;
  };
  const servers: TestServer[] = [];
  for (let shard = 0; shard < SHARDS; shard++) {
    const topology = () =>
      topologyOf(
        { count: SHARDS, index: shard },
        urls.map((url, i) => [{ id: `m${i}`, url, leader: true }]),
      );
    const server = await startTestServer({ ...limits, shards: SHARDS, shard }, undefined, 0, { peers: { calls: peer, topology, close: () => undefined } });
    urls.push(server.url);
    servers.push(server);
  }
  return servers;
}

describe("a cluster of 3 shards over the network, called at any member", () => {
  it("gives, for random sequences of every call, the answers of a single node (page numbers aside)", async () => {
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(1, 2), fc.array(OP, { minLength: 1, maxLength: 40 }), async (worldSize, ops) => {
        const servers = await cluster();
        try {
          const time = new FakeClock();
          const one = single(time);
          // Each call enters at the next member: each routes the parts of the other shards.
          const entries = servers.map((s) => callsOf(createClient(MetadataService, createGrpcTransport({ baseUrl: s.url }))));
          let next = 0;
          const many = modelOf(
            ((method, request, signal) => entries[next++ % SHARDS]!(method, request, signal)) as MetadataCalls,
            servers.map((s) => s.state),
            () => time.nowMs,
          );
          for (const op of ops) {
            if (op.op === "tick") for (const clock of [time, ...servers.map((s) => s.time)]) clock.advance(op.ms);
            expect(await step(many, op, worldSize)).toEqual(await step(one, op, worldSize));
            for (const state of [...one.states, ...many.states]) assertInvariants(state);
          }
        } finally {
          await Promise.all(servers.map((s) => s.close()));
        }
      }),
      { numRuns: Number(process.env.MODEL_RUNS ?? 60) },
    );
  }, 120_000);

  it("refuses a bad call as a single node does, naming the caller's positions, and holds the whole call to the member's --max-keys-per-call", async () => {
    const limits = { maxKeysPerCall: 20 };
    const [servers, node] = await Promise.all([cluster(limits), startTestServer(limits)]);
    try {
      const [member, one] = [servers[1]!, node].map((s) => createClient(MetadataService, createGrpcTransport({ baseUrl: s.url })));
      const keys = Array.from({ length: 32 }, (_, i) => `key-${i}`);
      const refusal = (call: Promise<unknown>) =>
        call.then(
          () => undefined,
          (error) => ({ reason: MetadataError.of(error).reason, message: MetadataError.of(error).rawMessage }),
        );
      for (const client of [member!, one!]) await client.initializeRank({ rank: 0, numPages: 64, worldSize: 1 });
      const bad = [
        (c: typeof one) => c!.batchAllocate({ rank: 0, keys }),
        (c: typeof one) => c!.batchAllocate({ rank: 0, keys: [...keys.slice(0, 5), "", ...keys.slice(5, 10)] }),
        (c: typeof one) => c!.batchExists({ keys: keys.slice(0, 12), rank: 0, callerRank: 0 }),
        (c: typeof one) => c!.confirmWrite({ rank: 0, keys: keys.slice(0, 12), pages: [1, 2, 3] }),
        (c: typeof one) => c!.confirmWrite({ rank: 0, pagesToRelease: [2, -3], keysToRelease: ["a", "b"] }),
      ];
      for (const call of bad) {
        const expected = await refusal(call(one));
        expect(expected).toBeDefined();
        expect(await refusal(call(member))).toEqual(expected);
      }
    } finally {
      await Promise.all([...servers, node].map((s) => s.close()));
    }
  });
});
