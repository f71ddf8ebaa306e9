import { createLogger } from "../server/logger.js";
import { stopSignal } from "../server/run-until-stopped.js";
import { type CallerFiles, callerFilesOf, callerSecurityOf } from "./caller-security.js";
import { listenEarly } from "./listen-early.js";
import { parseServerOptions, type ServerOptions, usage, usageError } from "./serve-options.js";

/**
 * serveCommand runs `hf3fs-metadata serve` until SIGTERM/SIGINT (exit 0) or
 * a store failure (exit 1). It binds the port as soon as the options and
 * the files they name are read, loading nothing of the core's state or the
 * generated code before (test/unit/cli/start-imports.test.ts), then loads
 * the single-node server (serve-node.ts) or the cluster member
 * (serve-member.ts), which serve the connections that waited.
 */
export async function serveCommand(args: string[]): Promise<number> {
  if (args.includes("--help") || args.includes("-h")) {
    console.log(usage());
    return 0;
  }
  let options: ServerOptions;
  try {
    options = parseServerOptions(args, process.env);
  } catch (e) {
    console.error(usageError((e as Error).message));
    return 2;
  }
  const logger = createLogger(options.logLevel);
  let files: CallerFiles;
  try {
    files = callerFilesOf(options);
  } catch (error) {
    console.error(`hf3fs-metadata serve: ${(error as Error).message}`);
    return 1;
  }
  const stopped = stopSignal();
  const port = await listenEarly("serve", options, logger);
  if (port === undefined) return 1;
  const security = await callerSecurityOf(files);
  const start = { options, security, port, stopped, logger };
  if (options.etcdEndpoints !== "") return (await import("../server/serve-member.js")).serveMember(start);
  return (await import("../server/serve-node.js")).serveNode(start);
}
