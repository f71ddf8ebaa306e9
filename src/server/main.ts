import { MetadataState } from "../core/state.js";
import { systemClock } from "../core/clock.js";
import { MemoryStore } from "../store/memory-store.js";
import type { Store } from "../store/store.js";
import { createLogger } from "./logger.js";
import { parseServerOptions, type ServerOptions, usage } from "./options.js";
import { startServer } from "./server.js";

const COMMANDS = "usage: hf3fs-metadata <command> [options]\n\ncommands:\n  serve     run the metadata server\n\nRun 'hf3fs-metadata serve --help' for the options.";

/** main runs one CLI command and returns the process exit code. */
export async function main(argv: string[]): Promise<number> {
  const [command, ...args] = argv;
  switch (command) {
    case "serve":
      if (args.includes("--help") || args.includes("-h")) {
        console.log(usage());
        return 0;
      }
      return serve(args);
    case undefined:
    case "--help":
    case "-h":
      console.log(COMMANDS);
      return command === undefined ? 2 : 0;
    default:
      console.error(`hf3fs-metadata: unknown command "${command}"\n\n${COMMANDS}`);
      return 2;
  }
}

async function serve(args: string[]): Promise<number> {
  let options: ServerOptions;
  try {
    options = parseServerOptions(args, process.env);
  } catch (e) {
    console.error(`hf3fs-metadata serve: ${(e as Error).message}\n\n${usage()}`);
    return 2;
  }
  const logger = createLogger(options.logLevel);
  const store: Store = new MemoryStore();
  const state = new MetadataState(systemClock, options, false);
  const server = await startServer({ state, store }, options, logger);

  const stopped = new Promise<number>((resolve) => {
    const stop = (signal: string) => {
      logger.info({ signal }, "shutting down");
      resolve(0);
    };
    process.once("SIGTERM", () => stop("SIGTERM"));
    process.once("SIGINT", () => stop("SIGINT"));
    server.failed.then((error) => {
      logger.fatal({ err: error }, "store failed; exiting so a supervisor restarts from the last durable state");
      resolve(1);
    });
  });
  const code = await stopped;
  await server.close();
  await store.close().catch((error: Error) => logger.error({ err: error }, "closing the store failed"));
  return code;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: Error) => {
    console.error(`hf3fs-metadata: ${error.stack ?? error.message}`);
    process.exit(1);
  },
);
