import { parseArgs } from "node:util";
import { MetadataState, systemClock } from "../core/index.js";
import { LmdbStore } from "../store/lmdb-store.js";
import { renderStats } from "./render-stats.js";

const USAGE =
  "usage: hf3fs-metadata inspect --data-dir DIR\n\nPrints the namespaces, ranks, page usage and key counts of a data dir, read-only (a shard's: its own part of each rank's pages).";

/** inspectCommand prints what a data dir holds, without a server. */
export async function inspectCommand(args: string[]): Promise<number> {
  let dataDir: string;
  try {
    const { values } = parseArgs({ args, options: { "data-dir": { type: "string" }, help: { type: "boolean", short: "h" } } });
    if (values.help) {
      console.log(USAGE);
      return 0;
    }
    dataDir = values["data-dir"] ?? process.env.HF3FS_METADATA_DATA_DIR ?? "./data";
  } catch (e) {
    console.error(`hf3fs-metadata inspect: ${(e as Error).message} (inspect --help)`);
    return 2;
  }
  try {
    const store = await LmdbStore.open(dataDir, { readOnly: true });
    // A shard's store holds its part of each rank's pages: its free pages are counted among those it owns.
    const part = store.shard;
    const state = new MetadataState(systemClock, { shards: part.count, shard: part.index }, false);
    state.restore(store.stored());
    const { clusterId } = store;
    await store.close();
    // Clients and status see a cluster member's answers as the cluster's id; its own id is the member id.
    const ids = clusterId === undefined ? `server id ${store.serverId}` : `cluster id ${clusterId}  member id ${store.serverId}`;
    const shard = part.count === 1 ? "" : `  shard ${part.index} of ${part.count}`;
    process.stdout.write(`store ${store.path}  ${ids}${shard}\n${renderStats(state.stats(undefined))}`);
    return 0;
  } catch (error) {
    console.error(`hf3fs-metadata inspect: ${(error as Error).message}`);
    return 1;
  }
}
