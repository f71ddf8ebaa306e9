import { readFileSync } from "node:fs";
import { hostname } from "node:os";
import { Etcd3 } from "etcd3";
import { systemClock } from "../core/clock.js";
import { MetadataState } from "../core/state.js";
import { Member } from "../replication/member.js";
import { isOrphanWatchResponse } from "../replication/watch.js";
import { AccessPolicy, readTokens } from "../service/access-policy.js";
import { Leadership } from "../service/leadership.js";
import { isInternalCommitRejection, LmdbStore } from "../store/lmdb-store.js";
import { MemoryStore } from "../store/memory-store.js";
import type { Store } from "../store/store.js";
import { tolerateKnownRejections } from "./known-rejections.js";
import { createLogger, type Logger } from "./logger.js";
import { parseServerOptions, type ServerOptions, usage } from "./options.js";
import { type RunningServer, type ServerConfig, startServer } from "./server.js";
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
  if (options.etcdEndpoints !== "") return serveMember(options, { access, tls }, logger);
  let store: Store;
  const state = new MetadataState(systemClock, options, !options.inMemory);
  try {
    if (!options.inMemory) tolerateKnownRejections([isInternalCommitRejection]);
    store = options.inMemory ? new MemoryStore() : await openAndLoad(options.dataDir, state, logger);
  } catch (error) {
    logger.fatal({ err: error }, "cannot start");
    console.error(`hf3fs-metadata serve: ${(error as Error).message}`);
    return 1;
  }
  const server = await startServer({ state, store }, { ...options, access, tls }, logger);
  return runUntilStopped(options, server, store, access, logger);
}

/**
 * serveMember runs a member of a highly available cluster (--etcd-endpoints):
 * it opens its data dir's store without loading it (the state is built when
 * the member leads), listens, and joins the cluster at its advertise URL.
 */
async function serveMember(options: ServerOptions, security: Pick<ServerConfig, "access" | "tls">, logger: Logger): Promise<number> {
  let member: Member;
  try {
    tolerateKnownRejections([isInternalCommitRejection, isOrphanWatchResponse]);
    const local = await LmdbStore.open(options.dataDir, { overlappingSync: true });
    const client = new Etcd3({ hosts: options.etcdEndpoints.split(","), dialTimeout: 2_000, grpcOptions: ETCD_GRPC_OPTIONS });
    const memberOptions = {
      clusterName: options.clusterName,
      leaderLeaseMs: options.leaderLeaseMs,
      state: options,
      clock: systemClock,
      // A member presents the first token of its token files to the leader for a snapshot (an admin call).
      token: (options.adminTokenFile || options.authTokenFile) === "" ? undefined : readTokens(options.adminTokenFile || options.authTokenFile)[0],
    };
    member = await Member.join(client, local, new Leadership(), memberOptions, logger).catch(async (error: Error) => {
      client.close();
      await local.close();
      throw error;
    });
  } catch (error) {
    logger.fatal({ err: error }, "cannot start");
    console.error(`hf3fs-metadata serve: ${(error as Error).message}`);
    return 1;
  }
  const server = await startServer(member.ledger, { ...options, ...security, leadership: member.leadership, cluster: member }, logger);
  member.start(advertiseUrlOf(options, server));
  logger.info({ cluster: options.clusterName, clusterId: member.clusterId, memberId: member.memberId }, "cluster: joined");
  return runUntilStopped(options, server, member.ledger.store, security.access, logger);
}

/**
 * advertiseUrlOf is --advertise-url, else the URL the server listens on;
 * on a wildcard address (0.0.0.0, ::) the host name stands for it, since
 * other machines cannot reach a wildcard. Never with a trailing slash: the
 * JSON routes append the request path to it when they redirect there.
 */
function advertiseUrlOf(options: ServerOptions, server: RunningServer): string {
  if (options.advertiseUrl !== "") return options.advertiseUrl.replace(/\/$/, "");
  if (options.host !== "0.0.0.0" && options.host !== "::") return server.url;
  return `${options.tlsCert === "" ? "http" : "https"}://${hostname()}:${server.port}`;
}

/** ETCD_GRPC_OPTIONS let a catch-up read return up to 32 log entries of 1 MB each. */
const ETCD_GRPC_OPTIONS = { "grpc.max_receive_message_length": 64 << 20 };

/** runUntilStopped serves until SIGTERM/SIGINT (0) or a store failure (1), then closes the server and the store. */
async function runUntilStopped(options: ServerOptions, server: RunningServer, store: Store, access: AccessPolicy | undefined, logger: Logger): Promise<number> {
  if (access !== undefined || options.tlsCert !== "") process.on("SIGHUP", () => reload(options, access, server, logger));
  const code = await new Promise<number>((resolve) => {
    const stop = (signal: string) => {
      logger.info({ signal }, "shutting down");
      resolve(0);
    };
    process.once("SIGTERM", () => stop("SIGTERM"));
    process.once("SIGINT", () => stop("SIGINT"));
    void server.failed.then((error) => {
      logger.fatal({ err: error }, "store failed; exiting so a supervisor restarts from the last durable state");
      resolve(1);
    });
  });
  await server.close();
  await store.close().catch((error: Error) => logger.error({ err: error }, "closing the store failed"));
  return code;
}

/** openAndLoad opens the store of dataDir and replays it into state, logging progress every second. */
async function openAndLoad(dataDir: string, state: MetadataState, logger: Logger): Promise<LmdbStore> {
  const started = Date.now();
  const store = await LmdbStore.open(dataDir);
  logger.info({ path: store.path, serverId: store.serverId }, "loading the store");
  state.restore(
    store.stored(({ records, elapsedMs, done }) => {
      const recordsPerSecond = Math.round((records / Math.max(elapsedMs, 1)) * 1_000);
      if (!done) logger.info({ records, recordsPerSecond }, "loading");
      else logger.info({ records, recordsPerSecond, elapsedMs: Date.now() - started }, "loaded");
    }),
  );
  return store;
}

/** accessPolicyOf builds the access policy of the token file options; undefined when none is given. Throws naming an unreadable or empty file. */
function accessPolicyOf(options: ServerOptions): AccessPolicy | undefined {
  if (options.authTokenFile === "" && options.adminTokenFile === "") return undefined;
  return new AccessPolicy({
    workerTokenFile: options.authTokenFile === "" ? undefined : options.authTokenFile,
    adminTokenFile: options.adminTokenFile === "" ? undefined : options.adminTokenFile,
  });
}

/** tlsOf reads the TLS files of the options; undefined without --tls-cert. Throws naming a file it cannot read. */
function tlsOf(options: ServerOptions): ListenerTls | undefined {
  if (options.tlsCert === "") return undefined;
  const read = (file: string) => {
    try {
      return readFileSync(file);
    } catch (error) {
      throw new Error(`cannot read the TLS file ${file}: ${(error as Error).message}`);
    }
  };
  return { cert: read(options.tlsCert), key: read(options.tlsKey), clientCa: options.tlsClientCa === "" ? undefined : read(options.tlsClientCa) };
}

/** reload re-reads the token files and the TLS files (SIGHUP); what fails to load keeps its previous value and is logged. Tokens are never logged. */
function reload(options: ServerOptions, access: AccessPolicy | undefined, server: RunningServer, logger: Logger): void {
  if (access !== undefined) {
    try {
      logger.info({ tokens: access.reload() }, "token files reloaded");
    } catch (error) {
      logger.error({ err: (error as Error).message }, "token files not reloaded; the previous tokens stay");
    }
  }
  if (options.tlsCert !== "") {
    try {
      server.reloadTls(tlsOf(options)!);
      logger.info({ cert: options.tlsCert }, "TLS certificates reloaded");
    } catch (error) {
      logger.error({ err: (error as Error).message }, "TLS certificates not reloaded; the previous ones stay");
    }
  }
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
