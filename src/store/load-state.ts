import type { Change } from "../core/change.js";
import type { MetadataState } from "../core/state.js";

/** LOAD_BATCH is how many stored records are restored between two turns of the event loop. */
const LOAD_BATCH = 20_000;

/**
 * loadState restores stored records into an empty state (MetadataState's
 * restore order), yielding to the event loop between batches: a server that
 * listens meanwhile answers health checks and holds calls, and a cluster
 * member keeps its etcd lease alive while a large state loads.
 */
export async function loadState(state: MetadataState, stored: Iterable<Change>): Promise<void> {
  const restoring = state.restoring();
  let n = 0;
  for (const change of stored) {
    restoring.add(change);
    if (++n % LOAD_BATCH === 0) await new Promise((resolve) => setImmediate(resolve));
  }
  restoring.finish();
}
