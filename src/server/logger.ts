import { type Logger, pino } from "pino";
import { FORMAT_VERSION } from "../store/schema.js";

export type { Logger };

/** createLogger writes one JSON line per event to stdout. */
export function createLogger(level: string): Logger {
  return pino({ level, base: { service: "hf3fs-metadata" } });
}

/** logMigration says that opening a store migrated it to the current format (LmdbStore.migratedFrom), once, at the start. */
export function logMigration(store: { readonly path: string; readonly migratedFrom: number | undefined }, logger: Logger): void {
  if (store.migratedFrom !== undefined) logger.info({ path: store.path, from: store.migratedFrom, to: FORMAT_VERSION }, "migrated the store");
}
