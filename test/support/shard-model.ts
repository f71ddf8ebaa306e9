import { create } from "@bufbuild/protobuf";
import fc from "fast-check";
import { expect } from "vitest";
import { AllocationStatus, MetadataService } from "../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { MetadataError as ClientError } from "../../src/client/metadata-error.js";
import { MetadataError } from "../../src/core/errors.js";
import { MetadataState } from "../../src/core/state.js";
import type { MetadataCalls, MethodName, RequestOf, ResponseOf } from "../../src/service/metadata-calls.js";
import { localCalls, metadataService } from "../../src/service/metadata-service.js";
import type { FakeClock } from "./fake-clock.js";

// A model of a worker's calls on a cluster of shards and on a single node, which give the same answers
// (page numbers aside): test/unit/service/shard-router.test.ts in process, test/server/shard-model.test.ts
// over the network through a member that routes.

const NUM_PAGES = 256;
export const KEYS = Array.from({ length: 24 }, (_, i) => `key-${i}`);

/** Reservation is what a worker knows of a key it was given a page for on a rank. */
interface Reservation {
  page: number;
  /** reservedAt is when a call gave the key its page, in the fake clock's ms. */
  reservedAt: number;
  /** confirmed is true once the worker confirmed it or got it as already written. */
  confirmed: boolean;
}

/** Model is a service and what its caller learned: the page each key got on each rank. */
export interface Model {
  calls: MetadataCalls;
  /** now is the time of the model's clock (the one every state of it reads), in ms. */
  now: () => number;
  /** pages is the page each key was last given on each rank ("rank/key"). */
  pages: Map<string, number>;
  /** held is what a worker may still confirm or release: live, unconfirmed reservations among them. */
  held: Map<string, Reservation>;
  /** states are the model's states (one, or one per shard), whose invariants hold after every call. */
  states: MetadataState[];
}

/** modelOf is a model of `calls` on `states`, whose time `now` tells. */
export function modelOf(calls: MetadataCalls, states: MetadataState[], now: () => number): Model {
  return { calls, now, pages: new Map(), held: new Map(), states };
}

/** single is the model everything is compared to: one node, in process. */
export function single(time: FakeClock): Model {
  const state = new MetadataState(time.clock, {}, false);
  return modelOf(localCalls(metadataService({ state }, "single")), [state], () => time.nowMs);
}

/** call makes a call and gives its answer, or the reason of its error. */
async function call<M extends MethodName>(model: Model, method: M, init: object): Promise<ResponseOf<M> | { error: number }> {
  const request = create(MetadataService.method[method].input, init as never) as RequestOf<M>;
  try {
    return (await model.calls(method, request)).response;
  } catch (error) {
    // The core's error in process; the client's MetadataError (its ErrorInfo's reason) over the network.
    if (error instanceof MetadataError || error instanceof ClientError) return { error: error.reason };
    throw error;
  }
}

export type Op =
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
  | { op: "batch"; rank: number; keys: string[] }
  | { op: "tick"; ms: number };

const rank = fc.integer({ min: 0, max: 1 });
const keys = fc.subarray(KEYS, { minLength: 1, maxLength: 12 }).chain((ks) => fc.shuffledSubarray(ks, { minLength: ks.length, maxLength: ks.length }));
export const OP: fc.Arbitrary<Op> = fc.oneof(
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
  { weight: 2, arbitrary: fc.record({ op: fc.constant("batch" as const), rank, keys }) },
  fc.record({ op: fc.constant("tick" as const), ms: fc.constantFrom(1_000, 11_000, 61_000) }),
);

/** RESERVATION_TTL_MS is the core's default --reservation-ttl. */
const RESERVATION_TTL_MS = 60_000;

/**
 * step makes one operation on a model and gives what must be the same on
 * a single node and on shards: statuses, whether a key has a page (not
 * which), counts, existence, stats, error reasons. Confirmations and
 * releases name only keys of which the model holds a live reservation, as
 * a worker confirms what it just reserved and wrote: a call naming a lapsed
 * or released reservation fails whole on one node but only in the part of
 * its shard on shards (each shard's part is atomic; see "leaves the parts
 * of other shards applied" below).
 */
export async function step(model: Model, op: Op, worldSize: number): Promise<unknown> {
  const now = model.now();
  const live = (rank: number, keys: string[]) =>
    [...new Set(keys)].filter((key) => {
      const held = model.held.get(`${rank}/${key}`);
      return held !== undefined && !held.confirmed && now - held.reservedAt < RESERVATION_TTL_MS;
    });
  const forget = (matches: (rank: number, key: string) => boolean) => {
    for (const at of model.held.keys()) {
      const [rank, key] = [Number(at.slice(0, at.indexOf("/"))), at.slice(at.indexOf("/") + 1)];
      if (matches(rank, key)) model.held.delete(at);
    }
  };
  switch (op.op) {
    case "init":
      return strip(await call(model, "initializeRank", { namespace: "kv", rank: op.rank, numPages: NUM_PAGES, worldSize }), ["serverId"]);
    case "allocate": {
      const prefixKeys = op.prefixed ? op.keys.map((_, i) => (i === 0 ? "" : op.keys[i - 1]!)) : [];
      const answer = await call(model, "batchAllocate", { namespace: "kv", rank: op.rank, keys: op.keys, prefixKeys });
      return "error" in answer ? answer : allocated(model, op.rank, op.keys, answer, now);
    }
    case "confirm": {
      const held = live(op.rank, op.keys);
      const pages = held.map((key) => model.held.get(`${op.rank}/${key}`)!.page);
      const answer = await call(model, "confirmWrite", { namespace: "kv", rank: op.rank, keys: held, pages });
      if (!("error" in answer)) for (const key of held) model.held.get(`${op.rank}/${key}`)!.confirmed = true;
      return answer;
    }
    case "release": {
      const held = live(op.rank, op.keys);
      const pagesToRelease = held.map((key) => model.held.get(`${op.rank}/${key}`)!.page);
      const answer = await call(model, "confirmWrite", { namespace: "kv", rank: op.rank, pagesToRelease, keysToRelease: held });
      if (!("error" in answer)) forget((rank, key) => rank === op.rank && held.includes(key));
      return answer;
    }
    case "exists":
      return await call(model, "batchExists", { namespace: "kv", keys: op.keys, rank: op.rank });
    case "locations": {
      const answer = await call(model, "getLocations", { namespace: "kv", rank: op.rank, keys: op.keys });
      if ("error" in answer) return answer;
      // A page given is the one the key was placed on.
      answer.pages.forEach((page, i) => {
        if (page >= 0) expect(page).toBe(model.pages.get(`${op.rank}/${op.keys[i]!}`));
      });
      return answer.pages.map((p) => p >= 0);
    }
    case "delete":
      forget((_, key) => op.keys.includes(key));
      return await call(model, "deleteKeys", { namespace: "kv", keys: op.keys });
    case "clear":
      forget((rank) => op.rank === undefined || rank === op.rank);
      return await call(model, "clear", { namespace: "kv", rank: op.rank });
    case "drop":
      forget((rank) => rank === op.rank);
      return await call(model, "dropRank", { namespace: "kv", rank: op.rank });
    case "reset":
      forget(() => true);
      return await call(model, "resetNamespace", { namespace: "kv", force: true });
    case "stats": {
      const answer = await call(model, "getStats", { allNamespaces: true });
      return "error" in answer ? answer : answer.namespaces.map((ns) => ({ ...ns, $typeName: undefined }));
    }
    case "batch": {
      // A Batch of calls that may come at once (their order is not promised): an allocate and two reads, each with its own result.
      const answer = await call(model, "batch", {
        calls: [
          { call: { case: "batchAllocate", value: { namespace: "kv", rank: op.rank, keys: op.keys } } },
          { call: { case: "batchExists", value: { namespace: "kv", keys: op.keys } } },
          { call: { case: "getLocations", value: { namespace: "kv", rank: op.rank, keys: op.keys } } },
        ],
      });
      if ("error" in answer) return answer;
      return answer.results.map(({ result }) => {
        if (result.case === "error") return { error: result.value.info?.reason };
        if (result.case === "batchAllocate") return allocated(model, op.rank, op.keys, result.value, now);
        if (result.case === "getLocations") return result.value.pages.map((p) => p >= 0);
        return result.value;
      });
    }
    case "tick":
      return undefined;
  }
}

/** allocated notes the pages an allocate gave on `rank` and gives what must be the same everywhere: statuses, and which keys got a page. */
function allocated(model: Model, rank: number, keys: string[], answer: ResponseOf<"batchAllocate">, now: number) {
  keys.forEach((key, i) => {
    const page = answer.pages[i]!;
    const status = answer.statuses[i]!;
    const at = `${rank}/${key}`;
    if (page < 0) return;
    // A reservation given again keeps its time; a new one, or a key already written, starts now.
    const known = model.held.get(at);
    const reservedAt = status === AllocationStatus.RESERVED && known?.page === page ? known.reservedAt : now;
    model.held.set(at, { page, reservedAt, confirmed: status === AllocationStatus.EXISTING });
    model.pages.set(at, page);
  });
  return { statuses: answer.statuses, placed: answer.pages.map((p) => p >= 0) };
}

function strip(answer: object, fields: string[]): object {
  return Object.fromEntries(Object.entries(answer).filter(([field]) => !fields.includes(field)));
}
