import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { MetadataService, type NamespaceStatsSchema } from "../../gen/hf3fs/metadata/v1/metadata_pb.js";
import type { NamespaceStatsView } from "../core/index.js";
import { actedRank, askedRank, NAMESPACE_COUNTERS } from "../core/index.js";
import { UNREACHED_HEADER } from "../protocol/headers.js";
import { type CallHeard, runBatch } from "./batch-calls.js";
import { keysOf } from "./key-bytes.js";
import type { Ledger } from "./ledger.js";
import type { MetadataCalls, MethodName, RequestOf } from "./metadata-calls.js";

/** HandlerContext is what of a call's context a handler reads: the caller's deadline, and the answer's headers (connect-node's context, the fast path's). */
export interface HandlerContext {
  readonly signal?: AbortSignal;
  readonly responseHeader?: Headers;
}

/** LocalService is MetadataService on this process's state: connect-node serves it, and the JSON routes call it (localCalls). */
export type LocalService = {
  [M in MethodName]: (request: RequestOf<M>, context?: HandlerContext) => Promise<MessageInitShape<(typeof MetadataService.method)[M]["output"]>>;
};

/**
 * metadataService implements MetadataService on the ledger's state (read at
 * each call: a cluster member gets a new state each time it starts leading). Each handler
 * calls the core and answers; the edge (edge.ts) commits the call's changes
 * before the reply and maps errors to status codes, whichever framing
 * serves the call.
 */
export function metadataService(ledger: Pick<Ledger, "state" | "reads">, serverId: string, heard?: CallHeard): LocalService {
  const service: LocalService = {
    async initializeRank(req) {
      return {
        ...ledger.state.initializeRank(req.namespace, req.rank, req.numPages, req.worldSize, {
          role: req.role,
          keyScope: req.keyScope,
          newKeyScope: req.newKeyScope,
          layout: req.layout,
        }),
        serverId,
      };
    },
    async batchAllocate(req) {
      return ledger.state.batchAllocate(req.namespace, req.rank, keysOf(req, "keys"), keysOf(req, "prefixKeys"));
    },
    async confirmWrite(req) {
      return ledger.state.confirmWrite(req.namespace, req.rank, keysOf(req, "keys"), req.pages, req.pagesToRelease, req.keysToRelease);
    },
    async batchExists(req) {
      const reads = ledger.reads?.() ?? ledger.state;
      return { exists: reads.batchExists(req.namespace, keysOf(req, "keys"), askedRank(reads, req.namespace, req)) };
    },
    async getLocations(req) {
      return { pages: ledger.state.getLocations(req.namespace, req.rank, keysOf(req, "keys"), req.includeIncomplete) };
    },
    async deleteKeys(req) {
      return { deleted: ledger.state.deleteKeys(req.namespace, req.keys, actedRank(ledger.state, req.namespace, req)) };
    },
    async clear(req) {
      if (req.allNamespaces) ledger.state.clear(undefined, req.rank ?? req.callerRank);
      else ledger.state.clear(req.namespace, actedRank(ledger.state, req.namespace, req));
      return {};
    },
    async dropRank(req) {
      return { forgottenKeys: ledger.state.dropRank(req.namespace, req.rank) };
    },
    async resetNamespace(req) {
      return ledger.state.reset(req.allNamespaces ? undefined : req.namespace, req.force, req.validateOnly);
    },
    async getStats(req) {
      const reads = ledger.reads?.() ?? ledger.state;
      if (!req.allNamespaces) return { namespaces: reads.stats(req.namespace).map(namespaceStats) };
      const { views, next } = reads.statsPage(req.pageToken, Math.min(req.pageSize || STATS_PAGE_SIZE, MAX_STATS_PAGE_SIZE));
      return { namespaces: views.map(namespaceStats), nextPageToken: next };
    },
    // Each call of a Batch runs as the handler of its method; the edge commits them together, once, before the answer.
    async batch(req) {
      return runBatch(req, (method, request) => (service[method] as unknown as (r: typeof request) => Promise<never>)(request), heard);
    },
  };
  return service;
}

/** localCalls are the handlers as a framing that translates its dialect calls them (the JSON routes). */
export function localCalls(service: LocalService): MetadataCalls {
  return async (method, request) => {
    const handler = service[method] as (
      request: RequestOf<typeof method>,
    ) => Promise<MessageInitShape<(typeof MetadataService.method)[typeof method]["output"]>>;
    return { response: create(MetadataService.method[method].output, await handler(request)) as never };
  };
}

/** routedService is MetadataService on calls that go elsewhere in part (a shard router's): each handler makes its call and answers its response. */
export function routedService(calls: MetadataCalls, heard?: CallHeard): LocalService {
  // The caller's deadline (connect-node's context, the fast path's signal) ends the parts sent to other shards too.
  const handler = (method: MethodName) => async (request: RequestOf<MethodName>, context?: HandlerContext) => {
    const { response, unreached } = await calls(method, request, context?.signal);
    // A shard's part answered as misses (no leader for --read-hold) marks the answer, as a relay's does.
    if (unreached) context?.responseHeader?.set(UNREACHED_HEADER, "1");
    return response;
  };
  const service = Object.fromEntries(MetadataService.methods.map((m) => [m.localName, handler(m.localName as MethodName)])) as unknown as LocalService;
  // A Batch's calls are routed each as it would be alone.
  service.batch = ((request: RequestOf<"batch">, context?: HandlerContext) =>
    runBatch(request, async (method, one) => (await calls(method, one, context?.signal)).response, heard)) as LocalService["batch"];
  return service;
}

/** STATS_PAGE_SIZE and MAX_STATS_PAGE_SIZE are GetStats' default and largest page_size, in namespaces (with all_namespaces). */
const STATS_PAGE_SIZE = 16;
const MAX_STATS_PAGE_SIZE = 256;

/** namespaceStats converts a view to the message, whose 64-bit counters are bigints. */
function namespaceStats(view: NamespaceStatsView): MessageInitShape<typeof NamespaceStatsSchema> {
  const message: MessageInitShape<typeof NamespaceStatsSchema> = {
    namespace: view.namespace,
    worldSize: view.worldSize,
    keyScope: view.keyScope,
    layout: view.layout,
    ranks: view.ranks,
  };
  for (const { field } of NAMESPACE_COUNTERS) message[field] = BigInt(view[field]);
  return message;
}
