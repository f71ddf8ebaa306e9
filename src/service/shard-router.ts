import { create } from "@bufbuild/protobuf";
import { AllocationStatus, MetadataService, type NamespaceStats, type RankStats, Reason } from "../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { allocateCall, type CallLimits, chainPrefixes, confirmCall, KeyList, keyShards, keysCall, NAMESPACE_COUNTERS, pageShard } from "../core/index.js";
import { runBatch } from "./batch-calls.js";
import { reasonOf, toConnectError } from "./error-table.js";
import { KeyBytesMessage, keysOf } from "./key-bytes.js";
import type { Answer, MetadataCalls, MethodName, RequestOf, ResponseOf } from "./metadata-calls.js";

/**
 * shardRouter answers MetadataService calls on a cluster of shards, one
 * MetadataCalls per shard (its leader, or this member's own handlers): a
 * call's keys go to the shards they belong to (keyShard), in parallel,
 * and their answers are merged in the caller's order; pages to release go
 * to the shard that owns them (pageShard); the calls on a whole namespace
 * (InitializeRank, Clear, DropRank, ResetNamespace, GetStats) go to every
 * shard and their answers are added up (a reset not forced is checked on
 * every shard first; a shrink of a rank one shard refuses is undone on the
 * others; a rank a drop finds gone on some shards is dropped). A call
 * whose keys all belong to one shard goes there as it came. When a part
 * fails, the call fails with the error of the lowest shard that failed;
 * the parts that succeeded stand, and the client retries the whole call
 * (a BatchAllocate retried gets the same pages back, RESERVED). Keys that
 * came as bytes go on as bytes (KeyBytesMessage.part). A call on keys is
 * first checked whole as a node checks it (keysCall), its keys made bytes
 * once for it and its hash: a part alone cannot see a parallel field's
 * length, nor name the caller's positions, nor hold the call to `limits`
 * (a member's own; a relay's and a client's as the topology names them:
 * without them, each shard holds only its part to its own).
 */
export function shardRouter(shards: readonly MetadataCalls[], limits: CallLimits = UNLIMITED): MetadataCalls {
  if (shards.length === 0) throw new RangeError("a cluster has at least one shard");
  if (shards.length === 1) return shards[0]!;
  const route = new Router(shards, limits);
  return (method, request, signal) => route.call(method, request, signal);
}

/** shardCalls are the calls of each of `count` shards: this one's own (`index`) and the peers' others. */
export function shardCalls(count: number, index: number, own: MetadataCalls, peers: { calls(shard: number): MetadataCalls }): MetadataCalls[] {
  return Array.from({ length: count }, (_, shard) => (shard === index ? own : peers.calls(shard)));
}

/** UNLIMITED checks a call's shape alone: the limits are each shard's. */
const UNLIMITED: CallLimits = { maxKeysPerCall: Number.POSITIVE_INFINITY, maxKeyBytes: Number.POSITIVE_INFINITY };

/** Part is one shard's share of a call: the positions of the caller's keys it carries. */
interface Part {
  readonly shard: number;
  readonly positions: number[];
}

class Router {
  constructor(
    private readonly shards: readonly MetadataCalls[],
    private readonly limits: CallLimits,
  ) {}

  /** call answers a call; async, so that a call refused before it is sent (its checks, a method without a route) is a rejected promise too. */
  async call<M extends MethodName>(method: M, request: RequestOf<M>, signal?: AbortSignal): Promise<Answer<M>> {
    const r = request as never;
    switch (method) {
      case "batchAllocate":
        return this.batchAllocate(r, signal) as never;
      case "confirmWrite":
        return this.confirmWrite(r, signal) as never;
      case "batchExists":
        return this.byKey("batchExists", r, signal, (answers, parts, n) => ({ exists: merged(answers, parts, n, (a) => a.exists, false) })) as never;
      case "getLocations":
        return this.byKey("getLocations", r, signal, (answers, parts, n) => ({ pages: merged(answers, parts, n, (a) => a.pages, -1) })) as never;
      case "deleteKeys":
        return this.byKey("deleteKeys", r, signal, (answers) => ({ deleted: sum(answers, (a) => a.deleted) })) as never;
      case "initializeRank":
        return this.initializeRank(r, signal) as never;
      case "clear":
        return this.everywhere("clear", r, signal, () => ({})) as never;
      case "dropRank":
        return this.dropRank(r, signal) as never;
      case "resetNamespace":
        return this.resetNamespace(r, signal) as never;
      case "getStats":
        return this.everywhere("getStats", r, signal, mergedStats) as never;
      case "batch":
        // Each call of a Batch is routed as it would be alone, and has its own result.
        return runBatch(r, async (m, one) => (await this.call(m, one, signal)).response).then((response) => answer("batch", response)) as never;
      default:
        throw new TypeError(`no route for ${method}`);
    }
  }

  /**
   * batchAllocate splits keys (and their prefix keys) by shard, and merges
   * pages and statuses. A key whose prefix key is another shard's key of
   * the same chain is sent the nearest one on its own shard instead
   * (chainPrefixes), for that shard's eviction.
   */
  private batchAllocate(request: RequestOf<"batchAllocate">, signal?: AbortSignal): Promise<Answer<"batchAllocate">> {
    // Read on the key fields as they came: reading `request.keys` would make every key a string.
    const { keys, prefixes } = allocateCall(request.namespace, keysOf(request, "keys"), keysOf(request, "prefixKeys"), this.limits);
    const shardOf = keyShards(request.namespace, keys, this.shards.length);
    const parts = partsOf(shardOf);
    const sources = prefixes === undefined || parts.length <= 1 ? undefined : chainPrefixes(keys, prefixes, shardOf);
    return this.send(
      "batchAllocate",
      parts,
      signal,
      request,
      (part) => {
        if (sources === undefined) {
          if (request instanceof KeyBytesMessage) return request.part(part.positions, prefixes !== undefined);
          return { ...request, keys: part.positions.map((i) => request.keys[i]!) };
        }
        const chosen = part.positions.map((i) => sources[i]!);
        // A KeyBytesMessage's key fields both lie in its request's bytes: the chosen prefixes are ranges of those bytes too.
        if (request instanceof KeyBytesMessage) return request.part(part.positions, true, {}, chosenKeys(keys, prefixes!, chosen));
        const prefixKeys = chosen.map((c) => (c >= 0 ? request.keys[c]! : request.prefixKeys[-1 - c]!));
        return { ...request, keys: part.positions.map((i) => request.keys[i]!), prefixKeys };
      },
      (answers, n) => ({
        pages: merged(answers, parts, n, (a) => a.pages, -1),
        statuses: merged(answers, parts, n, (a) => a.statuses, AllocationStatus.UNSPECIFIED),
      }),
      keys.length,
    );
  }

  /** confirmWrite splits the written keys by their shard and the pages to release by theirs; counts add up, completions map back. */
  private async confirmWrite(request: RequestOf<"confirmWrite">, signal?: AbortSignal): Promise<Answer<"confirmWrite">> {
    const count = this.shards.length;
    const writes = new Map<number, number[]>();
    const releases = new Map<number, number[]>();
    const { keys } = confirmCall(request.namespace, keysOf(request, "keys"), request.pages, request.pagesToRelease, request.keysToRelease, this.limits);
    const shardOf = keyShards(request.namespace, keys, count);
    for (let i = 0; i < shardOf.length; i++) push(writes, shardOf[i]!, i);
    for (let i = 0; i < request.pagesToRelease.length; i++) push(releases, releaseShard(request.pagesToRelease[i]!, count), i);
    const shards = [...new Set([...writes.keys(), ...releases.keys()])].sort((a, b) => a - b);
    if (shards.length <= 1) return this.shards[shards[0] ?? 0]!("confirmWrite", request, signal);
    const withKeys = request.keysToRelease.length > 0;
    const answers = await settled(
      shards.map((shard) => {
        const kept = writes.get(shard) ?? [];
        const freed = releases.get(shard) ?? [];
        const fields = {
          pages: kept.map((i) => request.pages[i]!),
          pagesToRelease: freed.map((i) => request.pagesToRelease[i]!),
          keysToRelease: withKeys ? freed.map((i) => request.keysToRelease[i]!) : [],
        };
        const part =
          request instanceof KeyBytesMessage
            ? request.part(kept, false, fields)
            : create(MetadataService.method.confirmWrite.input, { ...request, ...fields, keys: kept.map((i) => request.keys[i]!) });
        return this.shards[shard]!("confirmWrite", part, signal);
      }),
    );
    const completed = answers.flatMap((a, s) => a.response.completed.map((i) => (writes.get(shards[s]!) ?? [])[i]!)).sort((a, b) => a - b);
    return answer("confirmWrite", {
      confirmed: sum(answers, (a) => a.response.confirmed),
      released: sum(answers, (a) => a.response.released),
      completed,
    });
  }

  /** byKey splits a call's keys by shard and merges the parts' answers (merge gets them in the order of `parts`). */
  private byKey<M extends "batchExists" | "getLocations" | "deleteKeys">(
    method: M,
    request: RequestOf<M>,
    signal: AbortSignal | undefined,
    merge: (answers: ResponseOf<M>[], parts: Part[], n: number) => object,
  ): Promise<Answer<M>> {
    const { keys } = keysCall(request.namespace, keysOf(request, "keys"), this.limits);
    const parts = partsOf(keyShards(request.namespace, keys, this.shards.length));
    return this.send(
      method,
      parts,
      signal,
      request,
      (part) => (request instanceof KeyBytesMessage ? request.part(part.positions, false) : { ...request, keys: part.positions.map((i) => request.keys[i]!) }),
      (answers, n) => merge(answers, parts, n),
      keys.length,
    );
  }

  /** send sends each part to its shard (a call of one part as it came) and merges their answers. */
  private async send<M extends MethodName>(
    method: M,
    parts: Part[],
    signal: AbortSignal | undefined,
    request: RequestOf<M>,
    split: (part: Part) => object,
    merge: (answers: ResponseOf<M>[], n: number) => object,
    n: number,
  ): Promise<Answer<M>> {
    // No keys: any shard checks the rest of the request (the namespace, the rank) and answers for all.
    if (parts.length <= 1) return this.shards[parts[0]?.shard ?? 0]!(method, request, signal);
    const input = MetadataService.method[method].input;
    const answers = await settled(parts.map((part) => this.shards[part.shard]!(method, create(input, split(part) as never) as RequestOf<M>, signal)));
    const merged = answer(
      method,
      merge(
        answers.map((a) => a.response),
        n,
      ),
    );
    return answers.some((a) => a.unreached) ? { ...merged, unreached: true } : merged;
  }

  /** everywhere sends a call to every shard and merges their answers. */
  private async everywhere<M extends MethodName>(
    method: M,
    request: RequestOf<M>,
    signal: AbortSignal | undefined,
    merge: (answers: ResponseOf<M>[]) => object,
  ): Promise<Answer<M>> {
    const answers = await settled(this.shards.map((shard) => shard(method, request, signal)));
    return answer(method, merge(answers.map((a) => a.response)));
  }

  /**
   * initializeRank declares the rank on every shard. A shrink that a shard
   * refuses (a page past the new size held there) is undone on the shards
   * that made it: grown back to the size they had, which no shard refuses,
   * so that a refused resize leaves every shard's rank as it was.
   */
  private async initializeRank(request: RequestOf<"initializeRank">, signal?: AbortSignal): Promise<Answer<"initializeRank">> {
    const results = await Promise.allSettled(this.shards.map((shard) => shard("initializeRank", request, signal)));
    const failed = results.find((r) => r.status === "rejected");
    if (failed !== undefined) {
      const undo = (r: (typeof results)[number], shard: number) => {
        const shrunkFrom = r.status === "fulfilled" ? r.value.response.resizedFrom : 0;
        if (shrunkFrom <= request.numPages) return undefined;
        return this.shards[shard]!("initializeRank", create(MetadataService.method.initializeRank.input, { ...request, numPages: shrunkFrom }), signal);
      };
      await Promise.allSettled(results.map(undo));
      throw failed.reason;
    }
    const answers = results.map((r) => (r as PromiseFulfilledResult<Answer<"initializeRank">>).value.response);
    return answer("initializeRank", {
      ...answers[0]!,
      created: answers.some((a) => a.created),
      // Resized where any shard resized it now: a call sent again after a part failed finishes the resize.
      resizedFrom: Math.max(...answers.map((a) => a.resizedFrom)),
      freePages: sum(answers, (a) => a.freePages),
      // A client that sees the id change (any shard's server replaced) initializes its rank again.
      serverId: answers.map((a) => a.serverId).join(","),
    });
  }

  /**
   * dropRank drops the rank on every shard. A shard where it is gone
   * already (RANK_NOT_INITIALIZED) counts as done while another dropped it
   * now: a drop sent again after a part failed finishes it, instead of
   * failing on the shards its first send reached.
   */
  private async dropRank(request: RequestOf<"dropRank">, signal?: AbortSignal): Promise<Answer<"dropRank">> {
    const results = await Promise.allSettled(this.shards.map((shard) => shard("dropRank", request, signal)));
    const dropped = results.flatMap((r) => (r.status === "fulfilled" ? [r.value.response] : []));
    const gone = (error: unknown) => reasonOf(toConnectError(error, request.namespace)) === Reason.RANK_NOT_INITIALIZED;
    const failed = results.find((r) => r.status === "rejected" && !(dropped.length > 0 && gone(r.reason)));
    if (failed !== undefined) throw (failed as PromiseRejectedResult).reason;
    return answer("dropRank", { forgottenKeys: sum(dropped, (a) => a.forgottenKeys) });
  }

  /**
   * resetNamespace resets on every shard. One that is not forced is first
   * checked on every shard (validate_only), so that a reset one shard
   * refuses (its engines' calls, its reservations, its read leases) is
   * refused before any shard forgets the namespace.
   */
  private async resetNamespace(request: RequestOf<"resetNamespace">, signal?: AbortSignal): Promise<Answer<"resetNamespace">> {
    // Every shard holds every namespace's ranks: they are counted once; the keys are each shard's own.
    const merge = (answers: ResponseOf<"resetNamespace">[]) => ({
      namespaces: Math.max(...answers.map((a) => a.namespaces)),
      ranks: Math.max(...answers.map((a) => a.ranks)),
      forgottenKeys: sum(answers, (a) => a.forgottenKeys),
    });
    if (!request.force && !request.validateOnly) {
      await this.everywhere("resetNamespace", create(MetadataService.method.resetNamespace.input, { ...request, validateOnly: true }), signal, merge);
    }
    return this.everywhere("resetNamespace", request, signal, merge);
  }
}

/** chosenKeys is a KeyList of keys chosen from two lists over the same bytes: c ≥ 0 is keys[c], -1 - j is prefixes[j] (chainPrefixes). */
function chosenKeys(keys: KeyList, prefixes: KeyList, chosen: readonly number[]): KeyList {
  const list = (c: number) => (c >= 0 ? keys : prefixes);
  const at = (c: number) => (c >= 0 ? c : -1 - c);
  return new KeyList(
    keys.bytes,
    chosen.map((c) => list(c).starts[at(c)]!),
    chosen.map((c) => list(c).ends[at(c)]!),
  );
}

/** partsOf groups the positions of keys by the shard each key belongs to (`shards[i]`), in shard order. */
function partsOf(shards: readonly number[]): Part[] {
  const byShard = new Map<number, number[]>();
  for (let i = 0; i < shards.length; i++) push(byShard, shards[i]!, i);
  return [...byShard].sort(([a], [b]) => a - b).map(([shard, positions]) => ({ shard, positions }));
}

/** releaseShard is the shard of a page to release; one that is no page goes to shard 0, which refuses it as a node does (PAGE_OUT_OF_RANGE, after the rank's checks). */
function releaseShard(page: number, count: number): number {
  return Number.isInteger(page) && page >= 0 ? pageShard(page, count) : 0;
}

/** settled waits for every part; when any failed, it throws the error of the first (in shard order) that did. */
async function settled<T>(calls: Promise<T>[]): Promise<T[]> {
  const results = await Promise.allSettled(calls);
  const failed = results.find((r) => r.status === "rejected");
  if (failed !== undefined) throw failed.reason;
  return results.map((r) => (r as PromiseFulfilledResult<T>).value);
}

/** merged puts the parts' per-key answers back in the caller's order. */
function merged<A, T>(answers: A[], parts: Part[], n: number, field: (answer: A) => readonly T[], fill: T): T[] {
  const out = new Array<T>(n).fill(fill);
  parts.forEach((part, p) => {
    const values = field(answers[p]!);
    for (let j = 0; j < part.positions.length; j++) out[part.positions[j]!] = values[j]!;
  });
  return out;
}

/** mergedStats adds up the shards' stats of each namespace: its ranks' pages and its counters. */
function mergedStats(answers: ResponseOf<"getStats">[]): object {
  // A page of all namespaces ends where the shortest page ends, so that none is skipped on the next page.
  const tokens = answers.map((a) => a.nextPageToken).filter((t) => t !== "");
  const next = tokens.length === 0 ? "" : tokens.sort()[0]!;
  const byName = new Map<string, NamespaceStats>();
  for (const answer of answers) {
    for (const ns of answer.namespaces) {
      if (next !== "" && ns.namespace > next) continue;
      const into = byName.get(ns.namespace);
      if (into === undefined) {
        byName.set(ns.namespace, { ...ns, ranks: ns.ranks.map((r) => ({ ...r })) });
        continue;
      }
      for (const { field } of NAMESPACE_COUNTERS) (into as unknown as Record<string, bigint>)[field]! += (ns as unknown as Record<string, bigint>)[field]!;
      for (const rank of ns.ranks) {
        const same = into.ranks.find((r) => r.rank === rank.rank);
        if (same === undefined) into.ranks.push({ ...rank });
        else addPages(same, rank);
      }
    }
  }
  const namespaces = [...byName.values()].sort((a, b) => (a.namespace < b.namespace ? -1 : 1));
  for (const ns of namespaces) ns.ranks.sort((a, b) => a.rank - b.rank);
  return { namespaces, nextPageToken: next };
}

/** addPages adds a shard's pages of a rank to the rank's total (each shard holds its own part of the rank's pages). */
function addPages(into: RankStats, more: RankStats): void {
  into.freePages += more.freePages;
  into.reservedPages += more.reservedPages;
  into.usedPages += more.usedPages;
}

function answer<M extends MethodName>(method: M, response: object): Answer<M> {
  return { response: create(MetadataService.method[method].output, response as never) as ResponseOf<M> };
}

function sum<A>(answers: A[], field: (answer: A) => number): number {
  let total = 0;
  for (const a of answers) total += field(a);
  return total;
}

function push(map: Map<number, number[]>, shard: number, position: number): void {
  const positions = map.get(shard);
  if (positions === undefined) map.set(shard, [position]);
  else positions.push(position);
}
