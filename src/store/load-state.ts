import type { Change, Restoring } from "../core/index.js";

/** LOAD_BATCH is how many stored records are restored between two turns of the event loop. */
const LOAD_BATCH = 20_000;

/**
 * loadState restores stored records, in MetadataState's restore order,
 * into an empty MetadataState or ReplayState, yielding to the event loop
 * between batches: a server that
 * listens meanwhile answers health checks and holds calls, and a cluster
 * member keeps its etcd lease alive while a large state loads. It stops
 * between two batches once `stopped()` says so (the server is shutting
 * down and will close the store), and then resolves false.
 */
export async function loadState(state: { restoring(): Restoring }, stored: Iterable<Change>, stopped: () => boolean = () => false): Promise<boolean> {
  const restoring = state.restoring();
  let n = 0;
  for (const change of stored) {
    restoring.add(change);
    if (++n % LOAD_BATCH === 0) {
      await new Promise((resolve) => setImmediate(resolve));
      if (stopped()) return false;
    }
  }
  while (!restoring.link(LOAD_BATCH)) {
    await new Promise((resolve) => setImmediate(resolve));
    if (stopped()) return false;
  }
  restoring.finish();
  return true;
}
