import { systemClock } from "../core/clock.js";
import { MetadataError, Reason } from "../core/errors.js";
import { MetadataState } from "../core/state.js";
import { AccessPolicy } from "../service/access-policy.js";
import { isInternalCommitRejection, LmdbStore } from "../store/lmdb-store.js";
import { loadState } from "../store/load-state.js";
import { MemoryStore } from "../store/memory-store.js";
import { tolerateKnownRejections } from "./known-rejections.js";
import { createLogger, type Logger } from "./logger.js";
import { parseServerOptions, type ServerOptions, usage } from "./options.js";
import { runUntilStopped } from "./run-until-stopped.js";
import type { RunningServer } from "./server.js";
import { tlsOf } from "./tls-files.js";
import type { ListenerTls } from "./transport/dual-protocol-listener.js";

/** serveCommand runs `hf3fs-metadata serve` until SIGTERM/SIGINT (exit 0) or a store failure (exit 1). */
export async function serveCommand(args: string[]): Promise<number> {
  if (args.includes("--help") || args.includes("-h")) {
    console.log(usage());
    return 0;
  }
  let options: ServerOptions;
  try {
    options = parseServerOptions(args, process.env);
  } catch (e) {
    console.error(`hf3fs-metadata serve: ${(e as Error).message}\n\n${usage()}`);
    return 2;
  }
  const logger = createLogger(options.logLevel);
  let access: AccessPolicy | undefined;
  let tls: ListenerTls | undefined;
  try {
    access = accessPolicyOf(options);
    tls = tlsOf(options);
  } catch (error) {
    console.error(`hf3fs-metadata serve: ${(error as Error).message}`);
    return 1;
  }
  warnIfExposed(options, logger);
  if (options.etcdEndpoints !== "") return (await import("./serve-member.js")).serveMember(options, { access, tls }, logger);
  const state = new MetadataState(systemClock, options, !options.inMemory);
  if (!options.inMemory) tolerateKnownRejections([isInternalCommitRejection]);
  // Opening checks the store (format, owner; a child process reads it whole) and refuses a bad one before
  // listening, while the server's modules load; loading the state comes after listening.
  const opening = options.inMemory ? Promise.resolve(undefined) : LmdbStore.open(options.dataDir);
  const settled = opening.then(
    (durable) => ({ durable }),
    (error: Error) => ({ error }),
  );
  const { startServer } = await import("./server.js");
  const opened = await settled;
  if ("error" in opened) {
    logger.fatal({ err: opened.error }, "cannot start");
    console.error(`hf3fs-metadata serve: ${opened.error.message}`);
    return 1;
  }
  const { durable } = opened;
  const store = durable ?? new MemoryStore();
  const server = await startServer({ state, store }, { ...options, access, tls, starting: durable !== undefined }, logger);
  const loading = durable === undefined ? undefined : load(durable, state, server, logger);
  return runUntilStopped(options, server, store, access, logger, loading);
}

/**
 * load restores the store into state while the server listens (calls
 * wait), logging progress every second, then lets the held calls go on;
 * if loading fails they get STORE_UNAVAILABLE, and the promise rejects.
 */
async function load(store: LmdbStore, state: MetadataState, server: RunningServer, logger: Logger): Promise<void> {
  const started = Date.now();
  logger.info({ path: store.path, serverId: store.serverId }, "loading the store");
  try {
    await loadState(
      state,
      store.stored(({ records, elapsedMs, done }) => {
        const recordsPerSecond = Math.round((records / Math.max(elapsedMs, 1)) * 1_000);
        if (!done) logger.info({ records, recordsPerSecond }, "loading");
        else logger.info({ records, recordsPerSecond, elapsedMs: Date.now() - started }, "loaded");
      }),
    );
  } catch (error) {
    server.lifecycle.refuse(new MetadataError(Reason.STORE_UNAVAILABLE, `the server could not load its store: ${(error as Error).message}`));
    throw error;
  }
  server.lifecycle.started();
  logger.info({ tookMs: Date.now() - started }, "ready");
}

/** accessPolicyOf builds the access policy of the token file options; undefined when none is given. Throws naming an unreadable or empty file. */
function accessPolicyOf(options: ServerOptions): AccessPolicy | undefined {
  if (options.authTokenFile === "" && options.adminTokenFile === "") return undefined;
  return new AccessPolicy({
    workerTokenFile: options.authTokenFile === "" ? undefined : options.authTokenFile,
    adminTokenFile: options.adminTokenFile === "" ? undefined : options.adminTokenFile,
  });
}

/** warnIfExposed logs a warning when the server listens beyond loopback without tokens or without TLS. */
function warnIfExposed(options: ServerOptions, logger: Logger): void {
  if (isLoopback(options.host) || (options.authTokenFile !== "" && options.tlsCert !== "")) return;
  const missing = [
    options.authTokenFile === "" ? "without --auth-token-file (anyone who reaches the port may call it)" : "",
    options.tlsCert === "" ? "without TLS (tokens and keys cross the network in clear)" : "",
  ].filter((m) => m !== "");
  logger.warn({ host: options.host }, `listening beyond loopback ${missing.join(" and ")}`);
}

function isLoopback(host: string): boolean {
  return host === "localhost" || host === "::1" || host.startsWith("127.");
}
