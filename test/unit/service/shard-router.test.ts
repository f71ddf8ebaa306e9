import { create, toBinary } from "@bufbuild/protobuf";
import fc from "fast-check";
import { afterEach, describe, expect, it, vi } from "vitest";
import { assertInvariants } from "../../../bench/harness/invariants.js";
import { AllocationStatus, MetadataService } from "../../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { type MetadataError, Reason } from "../../../src/core/errors.js";
import { KeyList } from "../../../src/core/key-list.js";
import { keyShard } from "../../../src/core/shards.js";
import { MetadataState } from "../../../src/core/state.js";
import { BATCH_CODECS } from "../../../src/framing/grpc/batch-codecs.js";
import type { MetadataCalls, MethodName, RequestOf } from "../../../src/service/metadata-calls.js";
import { localCalls, metadataService } from "../../../src/service/metadata-service.js";
import { shardRouter } from "../../../src/service/shard-router.js";
import { FakeClock } from "../../support/fake-clock.js";
import { KEYS, type Model, modelOf, OP, single, step } from "../../support/shard-model.js";
import { wrongFields } from "../../support/wrong-fields.js";

/** asBytes is a request as the gRPC fast path decodes it: its keys left as the request's bytes (KeyBytesMessage). */
function asBytes<M extends MethodName>(method: M, init: object): RequestOf<M> {
  const schema = MetadataService.method[method].input;
  const name = method.charAt(0).toUpperCase() + method.slice(1);
  return BATCH_CODECS[name]!.decode(Buffer.from(toBinary(schema, create(schema, init as never))), Number.MAX_SAFE_INTEGER) as RequestOf<M>;
}

/** sharded is `count` shards in process, behind the router. */
function sharded(time: FakeClock, count: number): Model {
  const states = Array.from({ length: count }, (_, index) => new MetadataState(time.clock, { shards: count, shard: index }, false));
  const shards = states.map((state, index) => localCalls(metadataService({ state }, `shard-${index}`)));
  return modelOf(shardRouter(shards), states, () => time.nowMs);
}

describe("shardRouter: a cluster of shards answers as one node", () => {
  it("gives, for random sequences of every call, the answers of a single node (page numbers aside)", async () => {
    await fc.assert(
      // A world of one rank completes a key at its first confirmation; of two, at the second rank's.
      fc.asyncProperty(fc.integer({ min: 2, max: 4 }), fc.constantFrom(1, 2), fc.array(OP, { minLength: 1, maxLength: 60 }), async (count, worldSize, ops) => {
        const time = new FakeClock();
        const [one, many] = [single(time), sharded(time, count)];
        for (const op of ops) {
          if (op.op === "tick") time.advance(op.ms);
          expect(await step(many, op, worldSize)).toEqual(await step(one, op, worldSize));
          for (const state of [...one.states, ...many.states]) assertInvariants(state);
        }
      }),
      { numRuns: Number(process.env.MODEL_RUNS ?? 150) },
    );
  });

  it("spreads a call's keys over the shards, each getting its own part", async () => {
    const seen: string[][] = [[], [], []];
    const time = new FakeClock();
    const shards = [0, 1, 2].map((index) => {
      const calls = localCalls(metadataService({ state: new MetadataState(time.clock, { shards: 3, shard: index }, false) }, `s${index}`));
      return (async (method, request, signal) => {
        if (method === "batchExists") seen[index]!.push(...(request as RequestOf<"batchExists">).keys);
        return calls(method, request, signal);
      }) as MetadataCalls;
    });
    const router = shardRouter(shards);
    await router("initializeRank", create(MetadataService.method.initializeRank.input, { rank: 0, numPages: 8, worldSize: 1 }));
    await router("batchExists", create(MetadataService.method.batchExists.input, { keys: KEYS }));
    for (const [index, keys] of seen.entries()) expect(keys).toEqual(KEYS.filter((key) => keyShard("kv", key, 3) === index));
    expect(seen.every((keys) => keys.length > 0)).toBe(true);
  });

  it("leaves nothing behind when a part fails: the call retried whole gets the same pages back", async () => {
    const time = new FakeClock();
    let failNext = true;
    const shards = [0, 1].map((index) => {
      const calls = localCalls(metadataService({ state: new MetadataState(time.clock, { shards: 2, shard: index }, false) }, `s${index}`));
      return (async (method, request, signal) => {
        if (index === 1 && method === "batchAllocate" && failNext) {
          failNext = false;
          throw new Error("shard 1's leader went away");
        }
        return calls(method, request, signal);
      }) as MetadataCalls;
    });
    const router = shardRouter(shards);
    const allocate = create(MetadataService.method.batchAllocate.input, { rank: 0, keys: KEYS });
    await router("initializeRank", create(MetadataService.method.initializeRank.input, { rank: 0, numPages: 64, worldSize: 1 }));
    await expect(router("batchAllocate", allocate)).rejects.toThrow("shard 1's leader went away");
    const { response } = await router("batchAllocate", allocate);
    const expected = KEYS.map((key) => (keyShard("kv", key, 2) === 0 ? AllocationStatus.RESERVED : AllocationStatus.NEW));
    expect(response.statuses).toEqual(expected);
    // The pages are the shards' own, each once: shard 0's even, shard 1's odd.
    for (const [i, key] of KEYS.entries()) expect(response.pages[i]! % 2).toBe(keyShard("kv", key, 2));
    expect(new Set(response.pages).size).toBe(KEYS.length);
  });

  it("leaves the parts of other shards applied when one shard refuses its part, and a retry whole changes nothing more", async () => {
    const time = new FakeClock();
    const router = shardRouter(
      [0, 1].map((index) => localCalls(metadataService({ state: new MetadataState(time.clock, { shards: 2, shard: index }, false) }, `s${index}`))),
    );
    const [stale, good] = [KEYS.find((key) => keyShard("kv", key, 2) === 0)!, KEYS.find((key) => keyShard("kv", key, 2) === 1)!];
    await router("initializeRank", create(MetadataService.method.initializeRank.input, { rank: 0, numPages: 64, worldSize: 1 }));
    const { response: given } = await router("batchAllocate", create(MetadataService.method.batchAllocate.input, { rank: 0, keys: [stale, good] }));
    await router("confirmWrite", create(MetadataService.method.confirmWrite.input, { rank: 0, pagesToRelease: [given.pages[0]!], keysToRelease: [stale] }));
    const confirm = create(MetadataService.method.confirmWrite.input, { rank: 0, keys: [stale, good], pages: [...given.pages] });
    // Shard 0 refuses the released key whole; shard 1 confirms its key.
    await expect(router("confirmWrite", confirm)).rejects.toMatchObject({ reason: Reason.RESERVATION_NOT_FOUND });
    const exists = create(MetadataService.method.batchExists.input, { keys: [stale, good] });
    expect((await router("batchExists", exists)).response.exists).toEqual([false, true]);
    // The worker drops the key it released and confirms again: nothing more to confirm.
    const again = create(MetadataService.method.confirmWrite.input, { rank: 0, keys: [good], pages: [given.pages[1]!] });
    expect((await router("confirmWrite", again)).response.confirmed).toBe(0);
  });

  it("refuses a reset that one shard refuses on every shard, changing none: each is checked before any forgets", async () => {
    const time = new FakeClock();
    const states = [0, 1].map((index) => new MetadataState(time.clock, { shards: 2, shard: index, reservationTtlMs: 600_000 }, false));
    const router = shardRouter(states.map((state, index) => localCalls(metadataService({ state }, `s${index}`))));
    const [zero, one] = [KEYS.filter((key) => keyShard("m", key, 2) === 0), KEYS.filter((key) => keyShard("m", key, 2) === 1)];
    await router("initializeRank", create(MetadataService.method.initializeRank.input, { namespace: "m", rank: 0, numPages: 64, worldSize: 1 }));
    const { response } = await router("batchAllocate", create(MetadataService.method.batchAllocate.input, { namespace: "m", rank: 0, keys: zero }));
    await router("confirmWrite", create(MetadataService.method.confirmWrite.input, { namespace: "m", rank: 0, keys: zero, pages: [...response.pages] }));
    // A worker died writing a key of shard 1: its page stays reserved there, shard 0 has none.
    await router("batchAllocate", create(MetadataService.method.batchAllocate.input, { namespace: "m", rank: 0, keys: [one[0]!] }));
    time.advance(60_000);
    const reset = create(MetadataService.method.resetNamespace.input, { namespace: "m" });
    await expect(router("resetNamespace", reset)).rejects.toMatchObject({ reason: Reason.WRITES_IN_FLIGHT });
    // Shard 0 forgot nothing: its keys are there, as is shard 1's reserved page.
    expect(states.map((state) => [state.stats("m")[0]?.keys, state.stats("m")[0]?.ranks[0]?.reservedPages])).toEqual([
      [zero.length, 0],
      [0, 1],
    ]);
    // Forced, every shard forgets it.
    const forced = await router("resetNamespace", create(MetadataService.method.resetNamespace.input, { namespace: "m", force: true }));
    expect(forced.response).toMatchObject({ namespaces: 1, ranks: 1, forgottenKeys: zero.length });
    expect(states.map((state) => state.stats("m"))).toEqual([[], []]);
  });

  it("leaves every shard's rank as it was when one shard refuses to shrink it: the others grow it back", async () => {
    const time = new FakeClock();
    const states = [0, 1].map((index) => new MetadataState(time.clock, { shards: 2, shard: index }, false));
    const router = shardRouter(states.map((state, index) => localCalls(metadataService({ state }, `s${index}`))));
    const init = (numPages: number) =>
      router("initializeRank", create(MetadataService.method.initializeRank.input, { namespace: "m", rank: 0, numPages, worldSize: 1 }));
    await init(64);
    // Shard 1 holds its pages 1, 3, ..., 11; shard 0 holds none.
    const one = KEYS.filter((key) => keyShard("m", key, 2) === 1).slice(0, 6);
    const { response } = await router("batchAllocate", create(MetadataService.method.batchAllocate.input, { namespace: "m", rank: 0, keys: one }));
    expect(Math.max(...response.pages)).toBeGreaterThanOrEqual(8);
    await router("confirmWrite", create(MetadataService.method.confirmWrite.input, { namespace: "m", rank: 0, keys: one, pages: [...response.pages] }));
    await expect(init(8)).rejects.toMatchObject({ reason: Reason.RANK_CONFIG_MISMATCH });
    expect(states.map((state) => state.stats("m")[0]!.ranks[0]!.numPages)).toEqual([64, 64]);
    // Once shard 1's pages past 8 are free, the shrink goes through on both.
    await router("deleteKeys", create(MetadataService.method.deleteKeys.input, { namespace: "m", keys: one }));
    expect((await init(8)).response).toMatchObject({ numPages: 8, resizedFrom: 64 });
    expect(states.map((state) => state.stats("m")[0]!.ranks[0]!.numPages)).toEqual([8, 8]);
  });

  it("says a resize an InitializeRank sent again finished, when its first send resized the rank on one shard only", async () => {
    const time = new FakeClock();
    let down = false; // shard 1's leader
    const shards = [0, 1].map((index) => {
      const calls = localCalls(metadataService({ state: new MetadataState(time.clock, { shards: 2, shard: index }, false) }, `s${index}`));
      return (async (method, request, signal) => {
        if (index === 1 && down) throw new Error("shard 1's leader went away");
        return calls(method, request, signal);
      }) as MetadataCalls;
    });
    const router = shardRouter(shards);
    const init = (numPages: number) =>
      router("initializeRank", create(MetadataService.method.initializeRank.input, { namespace: "m", rank: 0, numPages, worldSize: 1 }));
    expect((await init(64)).response).toMatchObject({ created: true, resizedFrom: 0 });
    down = true;
    await expect(init(128)).rejects.toThrow("shard 1's leader went away"); // shard 0 grew it
    down = false;
    expect((await init(128)).response).toMatchObject({ created: false, numPages: 128, resizedFrom: 64, freePages: 128 });
    expect((await init(128)).response).toMatchObject({ resizedFrom: 0 });
  });

  it("finishes a DropRank sent again after a part failed: a shard where the rank is gone already counts as done", async () => {
    const time = new FakeClock();
    let down = true; // shard 1's leader, away for the first send
    const shards = [0, 1].map((index) => {
      const calls = localCalls(metadataService({ state: new MetadataState(time.clock, { shards: 2, shard: index }, false) }, `s${index}`));
      return (async (method, request, signal) => {
        if (index === 1 && method === "dropRank" && down) throw new Error("shard 1's leader went away");
        return calls(method, request, signal);
      }) as MetadataCalls;
    });
    const router = shardRouter(shards);
    for (const rank of [0, 1]) await router("initializeRank", create(MetadataService.method.initializeRank.input, { namespace: "m", rank, numPages: 8 }));
    const { response } = await router("batchAllocate", create(MetadataService.method.batchAllocate.input, { namespace: "m", rank: 1, keys: KEYS }));
    await router(
      "confirmWrite",
      create(MetadataService.method.confirmWrite.input, { namespace: "m", rank: 1, keys: KEYS.slice(0, 8), pages: response.pages.slice(0, 8) }),
    );
    const drop = create(MetadataService.method.dropRank.input, { namespace: "m", rank: 1 });
    await expect(router("dropRank", drop)).rejects.toThrow("shard 1's leader went away"); // shard 0 dropped it
    down = false;
    const { response: dropped } = await router("dropRank", drop);
    expect(dropped.forgottenKeys).toBe(KEYS.slice(0, 8).filter((key) => keyShard("m", key, 2) === 1).length);
    // Gone on every shard, a drop is refused as on one node.
    await expect(router("dropRank", drop)).rejects.toMatchObject({ reason: Reason.RANK_NOT_INITIALIZED });
  });

  describe("refuses a bad call as one node does: the same reason, field and message, naming the caller's positions", () => {
    const LIMITS = { maxKeysPerCall: 20, maxKeyBytes: 64 };
    const keys = (n: number) => KEYS.concat(KEYS.map((key) => `${key}'`)).slice(0, n);
    const long = "x".repeat(65);
    /** BAD are calls wrong in one way each, of keys on both shards: a part of each alone would be right, or wrong elsewhere. */
    const BAD: [string, MethodName, object][] = [
      ["an empty key at 5", "batchAllocate", { rank: 0, keys: [...keys(5), "", ...keys(10).slice(5)] }],
      ["10 prefix keys for 16 keys", "batchAllocate", { rank: 0, keys: keys(16), prefixKeys: keys(10) }],
      ["a key its own prefix at 7", "batchAllocate", { rank: 0, keys: keys(16), prefixKeys: keys(16).map((key, i) => (i === 7 ? key : "")) }],
      ["32 keys, over 20", "batchAllocate", { rank: 0, keys: keys(32) }],
      ["a key over 64 bytes", "batchAllocate", { rank: 0, keys: [...keys(9), long] }],
      ["a namespace holding U+001F", "batchAllocate", { namespace: "a\u001fb", rank: 0, keys: keys(8) }],
      ["3 pages for 16 keys", "confirmWrite", { rank: 0, keys: keys(16), pages: [1, 2, 3] }],
      ["a page past the rank", "confirmWrite", { rank: 0, keys: keys(3), pages: [1, 2, 300] }],
      ["3 pages to release for 1 key", "confirmWrite", { rank: 0, pagesToRelease: [1, 2, 3], keysToRelease: ["a"] }],
      ["a page to release past the rank", "confirmWrite", { rank: 0, pagesToRelease: [1, 2, 300], keysToRelease: ["a", "b", "c"] }],
      ["a negative page to release", "confirmWrite", { rank: 0, pagesToRelease: [2, -3], keysToRelease: ["a", "b"] }],
      ["a negative page", "confirmWrite", { rank: 0, keys: keys(4), pages: [-1, 2, 3, 4] }],
      ["an empty key at 5", "batchExists", { keys: [...keys(5), ""] }],
      ["32 keys, over 20", "batchExists", { keys: keys(32) }],
      ["an empty key at 5 of 22", "getLocations", { rank: 0, keys: [...keys(5), "", ...keys(16)] }],
      ["a key over 64 bytes", "deleteKeys", { keys: [...keys(5), long] }],
    ];
    /** refusal is the error a call gets, as the fields a caller reads of it; a refusal thrown rather than a rejected promise fails the test. */
    const refusal = (calls: MetadataCalls, method: MethodName, request: unknown) =>
      calls(method, request as never).then(
        ({ response }) => ({ answered: response }),
        (error: MetadataError) => ({ reason: error.reason, message: error.message, field: error.subject?.field }),
      );
    const ready = async (calls: MetadataCalls) => {
      await calls("initializeRank", create(MetadataService.method.initializeRank.input, { rank: 0, numPages: 64, worldSize: 1 }));
      return calls;
    };
    const node = (time: FakeClock) => ready(localCalls(metadataService({ state: new MetadataState(time.clock, LIMITS, false) }, "one")));
    /** shards are 2 shards with a node's limits behind a router given them (a member's) or not (a relay's, a client's). */
    const shards = (time: FakeClock, limits?: typeof LIMITS) =>
      ready(
        shardRouter(
          [0, 1].map((index) =>
            localCalls(metadataService({ state: new MetadataState(time.clock, { ...LIMITS, shards: 2, shard: index }, false) }, `s${index}`)),
          ),
          limits,
        ),
      );

    it("refuses, for random calls wrong in their fields, with a node's reason and field, and answers what a node answers", async () => {
      const init = wrongFields(KEYS.slice(0, 8));
      const methods = MetadataService.methods.filter((m) => m.methodKind === "unary" && m.localName !== "batch").map((m) => m.localName as MethodName);
      /** outcome is what must be the same on one node and on shards: the reason and field of a refusal, or an answer's statuses and counts. */
      const outcome = async (calls: MetadataCalls, method: MethodName, request: object) => {
        const answer = await refusal(calls, method, create(MetadataService.method[method].input, request as never));
        if (!("answered" in answer)) return { reason: answer.reason, field: answer.field };
        const { pages, statuses, exists, confirmed, released, deleted } = answer.answered as Record<string, unknown>;
        return { answered: { pages: Array.isArray(pages) ? pages.map((p) => p >= 0) : undefined, statuses, exists, confirmed, released, deleted } };
      };
      await fc.assert(
        fc.asyncProperty(fc.constantFrom(...methods), init, async (method, request) => {
          const time = new FakeClock();
          const [one, member, relay] = await Promise.all([node(time), shards(time, LIMITS), shards(time)]);
          const expected = await outcome(one, method, request);
          expect(await outcome(member, method, request)).toEqual(expected);
          if ((expected as { reason?: number }).reason !== Reason.LIMIT_EXCEEDED) expect(await outcome(relay, method, request)).toEqual(expected);
        }),
        { numRuns: Number(process.env.MODEL_RUNS ?? 150) * 4 },
      );
    });

    it.each(BAD)("%s (%s)", async (_, method, init) => {
      const time = new FakeClock();
      const [one, member, relay] = await Promise.all([node(time), shards(time, LIMITS), shards(time)]);
      const schema = MetadataService.method[method].input;
      const expected = await refusal(one, method, create(schema, init as never));
      expect(expected).toHaveProperty("reason");
      expect(await refusal(member, method, create(schema, init as never))).toEqual(expected);
      if (method !== "deleteKeys") expect(await refusal(member, method, asBytes(method, init))).toEqual(expected);
      // A router that does not know the servers' limits leaves them to each shard's part; every other refusal is a node's.
      const whole = ((init as { keys?: string[] }).keys?.length ?? 0) > LIMITS.maxKeysPerCall;
      if (!whole) expect(await refusal(relay, method, create(schema, init as never))).toEqual(expected);
    });
  });

  afterEach(() => vi.restoreAllMocks());

  it.each([
    ["strings", (init: object) => create(MetadataService.method.batchAllocate.input, init as never)],
    ["bytes", (init: object) => asBytes("batchAllocate", init)],
  ])(
    "keeps each shard's keys of a chain a chain there (keys as %s): a full shard evicts its last key of the chain, no key counted an orphan",
    async (_, request) => {
      const time = new FakeClock();
      const eviction = { evictHighWatermark: 1, evictLowWatermark: 1 };
      const states = [0, 1].map((shard) => new MetadataState(time.clock, { shards: 2, shard, ...eviction }, false));
      const router = shardRouter(states.map((state, shard) => localCalls(metadataService({ state }, `s${shard}`))));
      const call = async <M extends MethodName>(method: M, init: object) =>
        (await router(method, (method === "batchAllocate" ? request(init) : create(MetadataService.method[method].input, init as never)) as never)).response;
      const chain = Array.from({ length: 16 }, (_, i) => `block-${i}`);
      // The shard of more of the chain's keys, given as many pages as it has keys (each shard owns every other page), fills first.
      const on = [0, 1].map((shard) => chain.filter((key) => keyShard("", key, 2) === shard));
      const full = on[0]!.length >= on[1]!.length ? 0 : 1;
      await call("initializeRank", { rank: 0, numPages: 2 * on[full]!.length, worldSize: 1 });
      const { pages } = await call("batchAllocate", { rank: 0, keys: chain, prefixKeys: chain.map((_, i) => (i === 0 ? "" : chain[i - 1]!)) });
      await call("confirmWrite", { rank: 0, keys: chain, pages });
      time.advance(10);
      // A new root on the full shard: one of its keys goes.
      const root = Array.from({ length: 100 }, (_, i) => `root-${i}`).find((key) => keyShard("", key, 2) === full)!;
      expect((await call("batchAllocate", { rank: 0, keys: [root], prefixKeys: [""] })).pages[0]).toBeGreaterThanOrEqual(0);
      const { exists } = await call("batchExists", { keys: chain });
      // A prefix match reads the chain up to that shard's last key of it, which went; every other key stays.
      expect(exists.indexOf(false)).toBe(chain.indexOf(on[full]!.at(-1)!));
      expect(exists.filter((e) => !e)).toHaveLength(1);
      const [stats] = (await call("getStats", {})).namespaces;
      expect([stats!.orphanEvictions, stats!.leafEvictions]).toEqual([0n, 1n]);
      for (const state of states) assertInvariants(state);
    },
  );

  it("routes keys that came as bytes (a relay's fast path) without making them strings, with the answers of strings", async () => {
    const time = new FakeClock();
    const router = shardRouter(
      [0, 1].map((index) => localCalls(metadataService({ state: new MetadataState(time.clock, { shards: 2, shard: index }, false) }, `s${index}`))),
    );
    await router("initializeRank", create(MetadataService.method.initializeRank.input, { rank: 0, numPages: 64, worldSize: 1 }));
    const toStrings = vi.spyOn(KeyList.prototype, "toStrings");
    const { response: given } = await router("batchAllocate", asBytes("batchAllocate", { rank: 0, keys: KEYS, prefixKeys: ["", ...KEYS.slice(0, -1)] }));
    expect(given.pages.filter((page) => page >= 0)).toHaveLength(KEYS.length);
    const { response: confirmed } = await router("confirmWrite", asBytes("confirmWrite", { rank: 0, keys: KEYS, pages: given.pages }));
    expect(confirmed.confirmed).toBe(KEYS.length);
    const { response: exists } = await router("batchExists", asBytes("batchExists", { keys: [...KEYS, "absent"] }));
    expect(exists.exists).toEqual([...KEYS.map(() => true), false]);
    const { response: located } = await router("getLocations", asBytes("getLocations", { rank: 0, keys: KEYS }));
    expect(located.pages).toEqual(given.pages);
    expect(toStrings).not.toHaveBeenCalled();
  });
});
