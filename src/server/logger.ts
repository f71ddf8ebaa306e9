import { type Logger, pino } from "pino";
import { type OptionsOf, optionTable } from "../core/index.js";
import { FORMAT_VERSION } from "../store/schema.js";

export type { Logger };

/** LOG_OPTIONS choose what the server logs. */
export const LOG_OPTIONS = optionTable({
  logLevel: {
    kind: "string",
    choices: ["fatal", "error", "warn", "info", "debug", "trace", "silent"],
    default: "info",
  },
});

/** LogOptions choose what the server logs (LOG_OPTIONS). */
export type LogOptions = OptionsOf<typeof LOG_OPTIONS>;

/** createLogger writes one JSON line per event to stdout, its time in ISO 8601 (UTC). */
export function createLogger(level: string): Logger {
  return pino({ level, base: { service: "hf3fs-metadata" }, timestamp: pino.stdTimeFunctions.isoTime });
}

/** logMigration says that opening a store migrated it to the current format (LmdbStore.migratedFrom), once, at the start. */
export function logMigration(store: { readonly path: string; readonly migratedFrom: number | undefined }, logger: Logger): void {
  if (store.migratedFrom !== undefined) logger.info({ path: store.path, from: store.migratedFrom, to: FORMAT_VERSION }, "migrated the store");
}
