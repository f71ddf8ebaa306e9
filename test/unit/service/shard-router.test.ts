import { create, toBinary } from "@bufbuild/protobuf";
import fc from "fast-check";
import { afterEach, describe, expect, it, vi } from "vitest";
import { assertInvariants } from "../../../bench/harness/invariants.js";
import { AllocationStatus, MetadataService } from "../../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { Reason } from "../../../src/core/errors.js";
import { KeyList } from "../../../src/core/key-list.js";
import { keyShard } from "../../../src/core/shards.js";
import { MetadataState } from "../../../src/core/state.js";
import { BATCH_CODECS } from "../../../src/framing/grpc/batch-codecs.js";
import type { MetadataCalls, RequestOf } from "../../../src/service/metadata-calls.js";
import { localCalls, metadataService } from "../../../src/service/metadata-service.js";
import { shardRouter } from "../../../src/service/shard-router.js";
import { FakeClock } from "../../support/fake-clock.js";
import { KEYS, type Model, modelOf, OP, single, step } from "../../support/shard-model.js";

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

  afterEach(() => vi.restoreAllMocks());

  it("routes keys that came as bytes (a relay's fast path) without making them strings, with the answers of strings", async () => {
    const time = new FakeClock();
    const router = shardRouter(
      [0, 1].map((index) => localCalls(metadataService({ state: new MetadataState(time.clock, { shards: 2, shard: index }, false) }, `s${index}`))),
    );
    const asBytes = <M extends "batchAllocate" | "confirmWrite" | "batchExists" | "getLocations">(method: M, init: object): RequestOf<M> => {
      const schema = MetadataService.method[method].input;
      const name = method.charAt(0).toUpperCase() + method.slice(1);
      return BATCH_CODECS[name]!.decode(Buffer.from(toBinary(schema, create(schema, init as never))), Number.MAX_SAFE_INTEGER) as RequestOf<M>;
    };
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
