import { create } from "@bufbuild/protobuf";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { assertInvariants } from "../../../bench/harness/invariants.js";
import { AllocationStatus, MetadataService } from "../../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { MetadataError } from "../../../src/core/errors.js";
import { keyShard } from "../../../src/core/shards.js";
import { MetadataState } from "../../../src/core/state.js";
import type { MetadataCalls, MethodName, RequestOf, ResponseOf } from "../../../src/service/metadata-calls.js";
import { localCalls, metadataService } from "../../../src/service/metadata-service.js";
import { shardRouter } from "../../../src/service/shard-router.js";
import { FakeClock } from "../../support/fake-clock.js";

const NUM_PAGES = 256;
const KEYS = Array.from({ length: 24 }, (_, i) => `key-${i}`);

/** Model is a service and what its caller learned: the page each key got on each rank. */
interface Model {
  calls: MetadataCalls;
  pages: Map<string, number>;
  /** states are the model's states (one, or one per shard), whose invariants hold after every call. */
  states: MetadataState[];
}

function single(time: FakeClock): Model {
  const state = new MetadataState(time.clock, {}, false);
  return { calls: localCalls(metadataService({ state }, "single")), pages: new Map(), states: [state] };
}

function sharded(time: FakeClock, count: number): Model {
  const states = Array.from({ length: count }, (_, index) => new MetadataState(time.clock, { shards: count, shard: index }, false));
  const shards = states.map((state, index) => localCalls(metadataService({ state }, `shard-${index}`)));
  return { calls: shardRouter(shards), pages: new Map(), states };
}

/** call makes a call and gives its answer, or the reason of its error. */
async function call<M extends MethodName>(model: Model, method: M, init: object): Promise<ResponseOf<M> | { error: number }> {
  const request = create(MetadataService.method[method].input, init as never) as RequestOf<M>;
  try {
    return (await model.calls(method, request)).response;
  } catch (error) {
    if (error instanceof MetadataError) return { error: error.reason };
    throw error;
  }
}

type Op =
  | { op: "init"; rank: number }
  | { op: "allocate"; rank: number; keys: string[]; prefixed: boolean }
  | { op: "confirm"; rank: number; keys: string[] }
  | { op: "release"; rank: number; keys: string[] }
  | { op: "exists"; keys: string[]; rank?: number }
  | { op: "locations"; rank: number; keys: string[] }
  | { op: "delete"; keys: string[] }
  | { op: "clear"; rank?: number }
  | { op: "drop"; rank: number }
  | { op: "reset" }
  | { op: "stats" }
  | { op: "tick"; ms: number };

const rank = fc.integer({ min: 0, max: 1 });
const keys = fc.subarray(KEYS, { minLength: 1, maxLength: 12 }).chain((ks) => fc.shuffledSubarray(ks, { minLength: ks.length, maxLength: ks.length }));
const OP: fc.Arbitrary<Op> = fc.oneof(
  { weight: 2, arbitrary: fc.record({ op: fc.constant("init" as const), rank }) },
  { weight: 4, arbitrary: fc.record({ op: fc.constant("allocate" as const), rank, keys, prefixed: fc.boolean() }) },
  { weight: 4, arbitrary: fc.record({ op: fc.constant("confirm" as const), rank, keys }) },
  fc.record({ op: fc.constant("release" as const), rank, keys }),
  { weight: 2, arbitrary: fc.record({ op: fc.constant("exists" as const), keys, rank: fc.option(rank, { nil: undefined }) }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant("locations" as const), rank, keys }) },
  fc.record({ op: fc.constant("delete" as const), keys }),
  fc.record({ op: fc.constant("clear" as const), rank: fc.option(rank, { nil: undefined }) }),
  fc.record({ op: fc.constant("drop" as const), rank }),
  fc.record({ op: fc.constant("reset" as const) }),
  fc.record({ op: fc.constant("stats" as const) }),
  fc.record({ op: fc.constant("tick" as const), ms: fc.constantFrom(1_000, 11_000, 61_000) }),
);

/**
 * step makes one operation on a model and gives what must be the same on
 * a single node and on shards: statuses, whether a key has a page (not
 * which), counts, existence, stats, error reasons. Confirmations and
 * releases name only keys the model holds a reservation for, as workers
 * do, so no call of them fails in part.
 */
async function step(model: Model, op: Op, worldSize: number): Promise<unknown> {
  const at = (rank: number, key: string) => model.pages.get(`${rank}/${key}`);
  switch (op.op) {
    case "init":
      return strip(await call(model, "initializeRank", { namespace: "kv", rank: op.rank, numPages: NUM_PAGES, worldSize }), ["serverId"]);
    case "allocate": {
      const prefixKeys = op.prefixed ? op.keys.map((_, i) => (i === 0 ? "" : op.keys[i - 1]!)) : [];
      const answer = await call(model, "batchAllocate", { namespace: "kv", rank: op.rank, keys: op.keys, prefixKeys });
      if ("error" in answer) return answer;
      op.keys.forEach((key, i) => {
        if (answer.pages[i]! >= 0) model.pages.set(`${op.rank}/${key}`, answer.pages[i]!);
      });
      return { statuses: answer.statuses, placed: answer.pages.map((p) => p >= 0) };
    }
    case "confirm": {
      const held = [...new Set(op.keys)].filter((key) => at(op.rank, key) !== undefined);
      const pages = held.map((key) => at(op.rank, key)!);
      return await call(model, "confirmWrite", { namespace: "kv", rank: op.rank, keys: held, pages });
    }
    case "release": {
      const held = [...new Set(op.keys)].filter((key) => at(op.rank, key) !== undefined);
      const pagesToRelease = held.map((key) => at(op.rank, key)!);
      return await call(model, "confirmWrite", { namespace: "kv", rank: op.rank, pagesToRelease, keysToRelease: held });
    }
    case "exists":
      return await call(model, "batchExists", { namespace: "kv", keys: op.keys, rank: op.rank });
    case "locations": {
      const answer = await call(model, "getLocations", { namespace: "kv", rank: op.rank, keys: op.keys });
      if ("error" in answer) return answer;
      // A page given is the one the key was placed on.
      answer.pages.forEach((page, i) => {
        if (page >= 0) expect(page).toBe(at(op.rank, op.keys[i]!));
      });
      return answer.pages.map((p) => p >= 0);
    }
    case "delete":
      return await call(model, "deleteKeys", { namespace: "kv", keys: op.keys });
    case "clear":
      return await call(model, "clear", { namespace: "kv", rank: op.rank });
    case "drop":
      return await call(model, "dropRank", { namespace: "kv", rank: op.rank });
    case "reset":
      return await call(model, "resetNamespace", { namespace: "kv", force: true });
    case "stats": {
      const answer = await call(model, "getStats", { allNamespaces: true });
      return "error" in answer ? answer : answer.namespaces.map((ns) => ({ ...ns, $typeName: undefined }));
    }
    case "tick":
      return undefined;
  }
}

function strip(answer: object, fields: string[]): object {
  return Object.fromEntries(Object.entries(answer).filter(([field]) => !fields.includes(field)));
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
      { numRuns: 150 },
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
});
