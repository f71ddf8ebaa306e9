import type { MessageInitShape } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import type { MetadataService, NamespaceStatsSchema } from "../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { NAMESPACE_COUNTERS } from "../core/namespace-counters.js";
import type { MetadataState, NamespaceStatsView } from "../core/state.js";
import { keysOf } from "./key-bytes.js";

/**
 * metadataService implements MetadataService on the ledger's state (read at
 * each call: a cluster member gets a new state each time it starts leading). Each handler
 * calls the core and answers; the edge (edge.ts) commits the call's changes
 * before the reply and maps errors to status codes, whichever framing
 * serves the call.
 */
export function metadataService(ledger: { readonly state: MetadataState }, serverId: string): ServiceImpl<typeof MetadataService> {
  return {
    async initializeRank(req) {
      return { ...ledger.state.initializeRank(req.namespace, req.rank, req.numPages, req.worldSize, req.role, req.keyScope), serverId };
    },
    async batchAllocate(req) {
      return ledger.state.batchAllocate(req.namespace, req.rank, keysOf(req, "keys"), keysOf(req, "prefixKeys"));
    },
    async confirmWrite(req) {
      return ledger.state.confirmWrite(req.namespace, req.rank, keysOf(req, "keys"), req.pages, req.pagesToRelease, req.keysToRelease);
    },
    async batchExists(req) {
      return { exists: ledger.state.batchExists(req.namespace, keysOf(req, "keys"), req.rank) };
    },
    async getLocations(req) {
      return { pages: ledger.state.getLocations(req.namespace, req.rank, keysOf(req, "keys"), req.includeIncomplete) };
    },
    async deleteKeys(req) {
      return { deleted: ledger.state.deleteKeys(req.namespace, req.keys, req.rank) };
    },
    async clear(req) {
      ledger.state.clear(req.allNamespaces ? undefined : req.namespace, req.rank);
      return {};
    },
    async dropRank(req) {
      return { forgottenKeys: ledger.state.dropRank(req.namespace, req.rank) };
    },
    async getStats(req) {
      if (!req.allNamespaces) return { namespaces: ledger.state.stats(req.namespace).map(namespaceStats) };
      const { views, next } = ledger.state.statsPage(req.pageToken, Math.min(req.pageSize || STATS_PAGE_SIZE, MAX_STATS_PAGE_SIZE));
      return { namespaces: views.map(namespaceStats), nextPageToken: next };
    },
  };
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
    ranks: view.ranks,
  };
  for (const { field } of NAMESPACE_COUNTERS) message[field] = BigInt(view[field]);
  return message;
}
