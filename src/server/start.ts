import type { EarlyPort } from "../framing/http/early-port.js";
import { isInternalCommitRejection, LmdbStore } from "../store/lmdb-store.js";
import { logProgress } from "../store/load-progress.js";
import { FORMAT_VERSION } from "../store/schema.js";
import { tolerateKnownRejections } from "./known-rejections.js";
import type { Logger } from "./logger.js";
import type { ServerParts } from "./server.js";
import type { ServerOptions } from "./server-options.js";

/**
 * Start is what the serve command hands the server it starts (serve-node.ts
 * or serve-member.ts): the options, the security files read, the port
 * bound, the stop signal awaited.
 */
export interface Start {
  options: ServerOptions;
  security: Pick<ServerParts, "access" | "tls">;
  port: EarlyPort;
  stopped: Promise<NodeJS.Signals>;
  logger: Logger;
}

/**
 * openDurable opens the data dir's store for a server that is about to
 * serve from it (single-node or a cluster member): lmdb-js's known stray
 * rejections (and those of `rejections`) tolerated, a migration of its
 * format logged, with its progress every second while it runs; a data dir another process
 * holds is waited for (open's lockWaitMs: a restart may start the next
 * process while the previous one still drains and closes its store). Throws naming what is wrong with the data dir.
 */
export async function openDurable(
  dataDir: string,
  logger: Logger,
  open: Parameters<typeof LmdbStore.open>[1] = {},
  rejections: Parameters<typeof tolerateKnownRejections>[0] = [],
): Promise<LmdbStore> {
  tolerateKnownRejections([isInternalCommitRejection, ...rejections]);
  const migrating = logProgress(logger, "migrating the store");
  const waitingForLock = () => logger.warn({ dataDir, waitMs: open.lockWaitMs ?? 0 }, "the data dir is locked by another process; waiting for it to stop");
  const store = await LmdbStore.open(dataDir, { migrating, waitingForLock, ...open });
  logMigration(store, logger);
  return store;
}

/**
 * keepShard records the shard a single node's store keeps, or throws
 * naming both when it holds another's: its pages are that shard's, and a
 * server of this one would hand them out again. An empty store takes any.
 * (A cluster member's store is kept by its shard's cluster id instead.)
 */
export async function keepShard(store: LmdbStore, index: number, count: number): Promise<void> {
  const held = store.shard;
  if (held.index === index && held.count === count) return;
  if (!store.isEmpty()) {
    throw new Error(
      `the data dir ${store.path} holds shard ${held.index} of ${held.count}, not shard ${index} of ${count}: start it with the --shard and --shards it was made with`,
    );
  }
  await store.recordShard({ index, count });
}

/** logMigration says that opening a store migrated it to the current format (LmdbStore.migratedFrom), once, at the start. */
function logMigration(store: { readonly path: string; readonly migratedFrom: number | undefined }, logger: Logger): void {
  if (store.migratedFrom !== undefined) logger.info({ path: store.path, from: store.migratedFrom, to: FORMAT_VERSION }, "migrated the store");
}
