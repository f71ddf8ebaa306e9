import { create } from "@bufbuild/protobuf";
import { BatchExistsResponseSchema, GetLocationsResponseSchema } from "../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { UNREACHED_HEADER } from "../protocol/headers.js";
import { keysOf } from "./key-bytes.js";
import type { Leadership } from "./leadership.js";
import type { MetadataCalls, MethodName, RequestOf, ResponseOf } from "./metadata-calls.js";
import type { HandlerContext, LocalService } from "./metadata-service.js";

/**
 * LOOKUPS are the calls engines wait on without a deadline (vLLM's
 * batch_exists and get_locations, SGLang's exists and get_page_indices):
 * once no server can answer them for --read-hold, a relay and a cluster
 * member answer them as misses instead of holding them, as a miss costs
 * an engine only a recompute.
 */
export const LOOKUPS: ReadonlySet<MethodName> = new Set(["batchExists", "getLocations"]);

/** Lookup is a lookup's method (LOOKUPS). */
export type Lookup = "batchExists" | "getLocations";

/** missesOf is a lookup's answer with every key a miss: absent, no page. */
export function missesOf(method: Lookup, request: RequestOf<Lookup>): ResponseOf<Lookup> {
  const n = keysOf(request, "keys").length;
  return method === "batchExists"
    ? create(BatchExistsResponseSchema, { exists: new Array<boolean>(n).fill(false) })
    : create(GetLocationsResponseSchema, { pages: new Array<number>(n).fill(-1) });
}

/** MissGate says when lookups are answered as misses (a member's Leadership.lookupsMissedInMs() === 0), and hears of each. */
export interface MissGate {
  /** missing is true while lookups are answered as misses. */
  missing(): boolean;
  /** missed hears of a lookup answered as misses (counted; the first of an outage logged). */
  missed(method: Lookup): void;
}

/**
 * answeringMisses is `service` with its lookups answered as misses while
 * the gate says so, marked with UNREACHED_HEADER; the edge lets those
 * lookups through on a member that knows no leader (Edge), in the same
 * turn as the gate is read here.
 */
export function answeringMisses(service: LocalService, gate: MissGate): LocalService {
  const lookup = <M extends Lookup>(method: M) =>
    (async (request: RequestOf<M>, context?: HandlerContext) => {
      if (!gate.missing()) return (service[method] as (r: RequestOf<M>, c?: HandlerContext) => Promise<unknown>)(request, context);
      gate.missed(method);
      context?.responseHeader?.set(UNREACHED_HEADER, "1");
      return missesOf(method, request);
    }) as unknown as LocalService[M];
  return { ...service, batchExists: lookup("batchExists"), getLocations: lookup("getLocations") };
}

/** callsAnsweringMisses is `calls` (the JSON routes') with lookups answered as misses while the gate says so (answeringMisses). */
export function callsAnsweringMisses(calls: MetadataCalls, gate: MissGate): MetadataCalls {
  return (async (method: MethodName, request: RequestOf<MethodName>, signal?: AbortSignal) => {
    if (!LOOKUPS.has(method) || !gate.missing()) return calls(method, request as never, signal);
    gate.missed(method as Lookup);
    return { response: missesOf(method as Lookup, request as RequestOf<Lookup>), unreached: true };
  }) as MetadataCalls;
}

/**
 * leaderlessGate answers lookups as misses while a cluster member has
 * known no leader for --read-hold (Leadership.lookupsMissedInMs), counts
 * each, and tells the first of each outage (`outage`, to log it once).
 */
export function leaderlessGate(leadership: Pick<Leadership, "missesLookups">, count: (method: Lookup) => void, outage: () => void): MissGate {
  let told = false;
  return {
    missing() {
      const missing = leadership.missesLookups;
      if (!missing) told = false;
      return missing;
    },
    missed(method) {
      count(method);
      if (told) return;
      told = true;
      outage();
    },
  };
}

/**
 * PendingLookups are lookups on their way to a server that may be given
 * up, all at once, when no server can answer them for --read-hold (a
 * relay's upstream, a member's way to another shard): each then resolves
 * undefined, to be answered as misses, while its call goes on, its
 * answer unused.
 */
export class PendingLookups {
  private readonly waiting = new Set<() => void>();

  /** race resolves with `sent`'s answer, or undefined once given up (giveUp) before it. */
  race<T>(sent: Promise<T>): Promise<T | undefined> {
    return new Promise<T | undefined>((resolve, reject) => {
      const giveUp = () => resolve(undefined);
      this.waiting.add(giveUp);
      sent.then(resolve, reject).finally(() => this.waiting.delete(giveUp));
    });
  }

  /** giveUp gives up every lookup waiting now. */
  giveUp(): void {
    for (const giveUp of this.waiting) giveUp();
    this.waiting.clear();
  }
}
