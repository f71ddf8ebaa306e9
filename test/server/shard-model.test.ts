import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { assertInvariants } from "../../bench/harness/invariants.js";
import { MetadataService, Reason } from "../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { MetadataError } from "../../src/client/metadata-error.js";
import { keyShard } from "../../src/core/shards.js";
import type { MetadataCalls } from "../../src/service/metadata-calls.js";
import { FakeClock } from "../support/fake-clock.js";
import { modelOf, OP, single, step } from "../support/shard-model.js";
import { startTestServer } from "../support/test-server.js";
import { alone, callsOf, startTestShards } from "../support/test-shards.js";

const SHARDS = 3;

type Client = ReturnType<typeof createClient<typeof MetadataService>>;

describe("a cluster of 3 shards over the network, called at any member", () => {
  it("gives, for random sequences of every call, the answers of a single node (page numbers aside)", async () => {
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(1, 2), fc.array(OP, { minLength: 1, maxLength: 40 }), async (worldSize, ops) => {
        const servers = await startTestShards(SHARDS);
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
    const [servers, node] = await Promise.all([startTestShards(SHARDS, limits), startTestServer(limits)]);
    const [member, one] = [servers[1]!, node].map((s) => createClient(MetadataService, createGrpcTransport({ baseUrl: s.url }))) as [Client, Client];
    const keys = Array.from({ length: 32 }, (_, i) => `key-${i}`);
    const refusal = (call: Promise<unknown>) =>
      call.then(
        () => undefined,
        (error) => ({ reason: MetadataError.of(error).reason, message: MetadataError.of(error).rawMessage }),
      );
    for (const client of [member, one]) await client.initializeRank({ rank: 0, numPages: 64, worldSize: 1 });
    const bad = [
      (c: Client) => c.batchAllocate({ rank: 0, keys }),
      (c: Client) => c.batchAllocate({ rank: 0, keys: [...keys.slice(0, 5), "", ...keys.slice(5, 10)] }),
      (c: Client) => c.batchExists({ keys: keys.slice(0, 12), rank: 0, callerRank: 0 }),
      (c: Client) => c.confirmWrite({ rank: 0, keys: keys.slice(0, 12), pages: [1, 2, 3] }),
      (c: Client) => c.confirmWrite({ rank: 0, pagesToRelease: [2, -3], keysToRelease: ["a", "b"] }),
    ];
    for (const call of bad) {
      const expected = await refusal(call(one));
      expect(expected).toBeDefined();
      expect(await refusal(call(member))).toEqual(expected);
    }
  });

  it("refuses keys of another shard sent to a member as its own part, as a client routing with another hash would send them", async () => {
    const servers = await startTestShards(SHARDS);
    const zero = createClient(MetadataService, createGrpcTransport({ baseUrl: servers[0]!.url, interceptors: [alone] }));
    await zero.initializeRank({ rank: 0, numPages: 64, worldSize: 1 });
    const keys = Array.from({ length: 12 }, (_, i) => `key-${i}`);
    const [own, foreign] = [keys.filter((key) => keyShard("kv", key, SHARDS) === 0), keys.find((key) => keyShard("kv", key, SHARDS) !== 0)!];
    expect((await zero.batchAllocate({ rank: 0, keys: own })).pages.every((page) => page % SHARDS === 0)).toBe(true);
    const refused = await zero.batchAllocate({ rank: 0, keys: [...own, foreign] }).catch((error: unknown) => MetadataError.of(error));
    expect(refused).toMatchObject({ reason: Reason.INVALID_ARGUMENT, info: { field: "keys", key: foreign } });
    expect(servers[0]!.state.stats("kv")[0]!.ranks[0]!.reservedPages).toBe(own.length);
  });
});
