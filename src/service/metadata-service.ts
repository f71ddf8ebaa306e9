import type { MessageInitShape } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import { MetadataService, NamespaceStatsSchema } from "../../gen/hf3fs/metadata/v1/metadata_pb.js";
import type { MetadataState, NamespaceStatsView } from "../core/state.js";
import type { Store } from "../store/store.js";

/** Ledger is the state with the store that makes its changes durable. */
export interface Ledger {
  readonly state: MetadataState;
  readonly store: Store;
}

/**
 * commit makes every change the state made so far durable. Calls that
 * changed nothing still wait, so no reply is built from state the store
 * does not have yet.
 */
export function commit(ledger: Ledger): Promise<void> {
  return ledger.store.commit(ledger.state.takeChanges());
}

/**
 * metadataService implements MetadataService on a ledger. Each handler
 * calls the core, commits, and answers; errors are mapped to status codes at
 * the edge (callAtEdge), whichever path serves the call, not here.
 */
export function metadataService(ledger: Ledger): ServiceImpl<typeof MetadataService> {
  const { state, store } = ledger;
  return {
    async initializeRank(req) {
      const result = state.initializeRank(req.namespace, req.rank, req.numPages, req.worldSize, req.role);
      await commit(ledger);
      return { ...result, serverId: store.serverId };
    },
    async batchAllocate(req) {
      const result = state.batchAllocate(req.namespace, req.rank, req.keys, req.prefixKeys);
      await commit(ledger);
      return result;
    },
    async confirmWrite(req) {
      const result = state.confirmWrite(req.namespace, req.rank, req.keys, req.pages, req.pagesToRelease);
      await commit(ledger);
      return result;
    },
    async batchExists(req) {
      const exists = state.batchExists(req.namespace, req.keys, req.rank);
      await commit(ledger);
      return { exists };
    },
    async getLocations(req) {
      const pages = state.getLocations(req.namespace, req.rank, req.keys, req.includeIncomplete);
      await commit(ledger);
      return { pages };
    },
    async deleteKeys(req) {
      const deleted = state.deleteKeys(req.namespace, req.keys);
      await commit(ledger);
      return { deleted };
    },
    async clear(req) {
      state.clear(req.allNamespaces ? undefined : req.namespace);
      await commit(ledger);
      return {};
    },
    async getStats(req) {
      const views = state.stats(req.allNamespaces ? undefined : req.namespace);
      await commit(ledger);
      return { namespaces: views.map(namespaceStats) };
    },
  };
}

/** namespaceStats converts counts to the message, whose 64-bit counters are bigints. */
function namespaceStats(view: NamespaceStatsView): MessageInitShape<typeof NamespaceStatsSchema> {
  return {
    ...view,
    keys: BigInt(view.keys),
    completeKeys: BigInt(view.completeKeys),
    evictions: BigInt(view.evictions),
    expiredReservations: BigInt(view.expiredReservations),
    reclaimedIncompleteKeys: BigInt(view.reclaimedIncompleteKeys),
  };
}
