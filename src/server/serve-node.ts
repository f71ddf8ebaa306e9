import { MetadataError, MetadataState, Reason, systemClock } from "../core/index.js";
import type { LmdbStore } from "../store/lmdb-store.js";
import { CurrentLoad, logProgress, progressFields } from "../store/load-progress.js";
import { loadState } from "../store/load-state.js";
import { MemoryStore } from "../store/memory-store.js";
import type { Logger } from "./logger.js";
import { cannotStart, runUntilStopped } from "./run-until-stopped.js";
import type { RunningServer } from "./server.js";
import { keepShard, openDurable, type Start } from "./start.js";

/**
 * serveNode runs the single-node server on a port bound already: it opens
 * and checks its store (a bad one exits 1), serves, and loads the store's
 * state while calls wait for it (--startup-hold).
 */
export async function serveNode({ options, security, port, stopped, logger }: Start): Promise<number> {
  const state = new MetadataState(systemClock, options, !options.inMemory);
  // Opening checks the store (a child process reads it whole) while the server's modules load.
  const opening = (
    options.inMemory
      ? Promise.resolve(undefined)
      : openDurable(options.dataDir, logger, { lockWaitMs: options.lockWaitMs }).then(async (store) => {
          await keepShard(store, options.shard, options.shards).catch(async (error: Error) => {
            await store.close();
            throw error;
          });
          return store;
        })
  ).then(
    (durable) => ({ durable }),
    (error: Error) => ({ error }),
  );
  const { startServer } = await import("./server.js");
  const opened = await opening;
  if ("error" in opened) return cannotStart(logger, opened.error);
  const { durable } = opened;
  const store = durable ?? new MemoryStore();
  const loads = new CurrentLoad();
  const server = await startServer({ state, store }, options, { ...security, bound: port, starting: durable !== undefined, loads }, logger);
  const loading = durable === undefined ? undefined : load(durable, state, server, logger, loads);
  if (durable === undefined) logger.info({ tookMs: 0 }, "ready"); // nothing to load
  return runUntilStopped(options, server, store, security.access, logger, stopped, loading);
}

/**
 * load restores the store into state while the server serves (calls
 * wait), logging progress every second, then lets the held calls go on;
 * if loading fails they get STORE_UNAVAILABLE, and the promise rejects. A
 * server told to stop meanwhile stops loading (its calls got its refusal).
 */
async function load(store: LmdbStore, state: MetadataState, server: RunningServer, logger: Logger, loads: CurrentLoad): Promise<void> {
  const started = Date.now();
  const log = logProgress(logger, "loading");
  logger.info({ path: store.path, serverId: store.serverId }, "loading the store");
  let loaded: boolean;
  try {
    loaded = await loads.track(
      "loading the store",
      (report) => loadState(state, store.stored(report), () => server.lifecycle.refusal !== undefined),
      (progress) => {
        if (!progress.done) return log(progress);
        const { records, recordsPerSecond } = progressFields(progress);
        logger.info({ records, recordsPerSecond, elapsedMs: Date.now() - started }, "loaded");
      },
    );
  } catch (error) {
    server.lifecycle.refuse(new MetadataError(Reason.STORE_UNAVAILABLE, `the server could not load its store: ${(error as Error).message}`));
    throw error;
  }
  if (!loaded) return; // stopped while loading: the calls that waited got the server's refusal
  server.lifecycle.started();
  logger.info({ tookMs: Date.now() - started }, "ready");
}
