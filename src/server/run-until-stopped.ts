import type { AccessPolicy } from "../service/access-policy.js";
import type { Store } from "../store/store.js";
import type { Logger } from "./logger.js";
import type { RunningServer } from "./server.js";
import type { ServerOptions } from "./server-options.js";
import { tlsOf } from "./tls-files.js";

/**
 * stopSignal resolves with the first SIGTERM or SIGINT the process gets
 * from now on. The serve command listens for them first thing, so a stop
 * that comes while the server is still starting is kept until it can drain.
 */
export function stopSignal(): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    process.once("SIGTERM", () => resolve("SIGTERM"));
    process.once("SIGINT", () => resolve("SIGINT"));
  });
}

/**
 * runUntilStopped serves until `stopped` (0), a store failure (1) or a
 * failed `loading` (1: a store that cannot be loaded is refused, whatever
 * calls wait for it), then closes the server and the store. SIGHUP re-reads
 * the token and TLS files.
 */
export async function runUntilStopped(
  options: ServerOptions,
  server: RunningServer,
  store: Store,
  access: AccessPolicy | undefined,
  logger: Logger,
  stopped: Promise<NodeJS.Signals>,
  loading: Promise<void> = Promise.resolve(),
): Promise<number> {
  if (access !== undefined || options.tlsCert !== "") process.on("SIGHUP", () => reload(options, access, server, logger));
  const code = await new Promise<number>((resolve) => {
    void stopped.then((signal) => {
      logger.info({ signal }, "shutting down");
      resolve(0);
    });
    void server.failed.then((error) => {
      logger.fatal({ err: error }, "store failed; exiting so a supervisor restarts from the last durable state");
      resolve(1);
    });
    loading.catch((error: Error) => {
      logger.fatal({ err: error }, "cannot load the store");
      console.error(`hf3fs-metadata serve: cannot load the store: ${error.message}`);
      resolve(1);
    });
  });
  await server.close();
  await store.close().catch((error: Error) => logger.error({ err: error }, "closing the store failed"));
  return code;
}

/** cannotStart reports why the server cannot start, in the log and in one line on stderr, and gives the exit code (1). */
export function cannotStart(logger: Logger, error: Error): number {
  logger.fatal({ err: error }, "cannot start");
  console.error(`hf3fs-metadata serve: ${error.message}`);
  return 1;
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
