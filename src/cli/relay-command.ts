import type { ClientTls } from "../client/metadata-client.js";
import { defaultRelayOptions, RELAY_TABLES, type RelayOptions, relayOptions } from "../relay/relay-options.js";
import { createLogger } from "../server/logger.js";
import { stopSignal } from "../server/run-until-stopped.js";
import { readTokens } from "../service/token-file.js";
import { type CallerFiles, callerFilesOf, callerSecurityOf, readOptionFile } from "./caller-security.js";
import { CommandOptions } from "./command-options.js";
import { listenEarly } from "./listen-early.js";

/** RELAY is the options of `relay`, by concern (RELAY_TABLES). */
export const RELAY = new CommandOptions("relay", RELAY_TABLES, defaultRelayOptions, relayOptions);

/**
 * relayCommand runs `hf3fs-metadata relay` until SIGTERM/SIGINT (exit 0):
 * it binds its port as soon as the options are read (callers' connections
 * wait rather than fail), then relays every call to --upstream.
 */
export async function relayCommand(args: string[]): Promise<number> {
  if (args.includes("--help") || args.includes("-h")) {
    console.log(RELAY.usage());
    return 0;
  }
  let options: RelayOptions;
  try {
    options = RELAY.parse(args, process.env);
  } catch (e) {
    console.error(RELAY.error((e as Error).message));
    return 2;
  }
  const logger = createLogger(options.logLevel);
  let files: CallerFiles;
  let upstreamToken: string | undefined;
  let upstreamTls: ClientTls | undefined;
  try {
    files = callerFilesOf(options);
    upstreamToken = options.upstreamTokenFile === "" ? undefined : readTokens(options.upstreamTokenFile)[0];
    upstreamTls = upstreamTlsOf(options);
  } catch (error) {
    console.error(`hf3fs-metadata relay: ${(error as Error).message}`);
    return 1;
  }
  const stopped = stopSignal();
  const port = await listenEarly("relay", options, logger);
  if (port === undefined) return 1;
  const security = await callerSecurityOf(files);
  const { startRelay } = await import("../relay/relay.js");
  const relay = await startRelay(options, { ...security, bound: port, upstreamToken, upstreamTls }, logger);
  logger.info({ signal: await stopped }, "shutting down");
  await relay.close();
  return 0;
}

/** upstreamTlsOf reads the upstream's TLS files; undefined when none is given (an https upstream is then checked against the system's CAs). */
function upstreamTlsOf(options: RelayOptions): ClientTls | undefined {
  if (options.upstreamCa === "" && options.upstreamCert === "") return undefined;
  const read = (file: string) => (file === "" ? undefined : readOptionFile(file, "upstream TLS file"));
  return { ca: read(options.upstreamCa), cert: read(options.upstreamCert), key: read(options.upstreamKey) };
}
