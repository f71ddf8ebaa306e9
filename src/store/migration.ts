import type { Database, Key } from "lmdb";
import { isPreParentKeyValue, type RecordValue } from "../core/index.js";
import { type LoadProgress, ProgressReporter } from "./load-progress.js";
import { FORMAT_VERSION, withRootParent } from "./schema.js";

/** entryCount is the number of records of the tables, from LMDB's entry counts (no walk); a table not there counts none. */
export function entryCount(tables: readonly (Database | undefined)[]): number {
  return tables.reduce((sum, db) => sum + ((db?.getStats() as { entryCount?: number } | undefined)?.entryCount ?? 0), 0);
}

/** MIGRATION_CHUNK is the number of records a migration rewrites per transaction. */
const MIGRATION_CHUNK = 10_000;

/**
 * migrateParents brings a store of version 1 or 2 to version 3: every key
 * record gets a root parent (schema.ts), a chunk per transaction, then the
 * version is written. Records already in the new layout are left alone, so
 * a migration cut short is taken up again at the next open.
 */
export function migrateParents(dbs: { keys: Database; long_keys: Database; meta: Database }, migrating: (p: LoadProgress) => void): void {
  const reporter = new ProgressReporter(migrating, entryCount([dbs.keys, dbs.long_keys]));
  // Reported about every second, between chunks: how many of the key records were read.
  let records = 0;
  const read = (chunk: number) => {
    records += chunk;
    reporter.at(records);
  };
  migrateKeyValues(dbs.keys, 0, read);
  migrateKeyValues(dbs.long_keys, 2, read); // after [namespace, key]
  dbs.meta.putSync("formatVersion", FORMAT_VERSION);
  reporter.done();
}

/** migrateKeyValues rewrites the records of a key table whose key value (from index `at` of the value) is of the layout before version 3, as roots; `read` hears each chunk's size. */
function migrateKeyValues(db: Database, at: number, read: (records: number) => void): void {
  const keyValue = (value: unknown) => (value as RecordValue).slice(at);
  for (let start: Key | undefined; ; ) {
    const chunk = [...db.getRange({ start, limit: MIGRATION_CHUNK })];
    // The first record of a chunk after the first is the last of the one before (start is inclusive).
    read(start === undefined ? chunk.length : chunk.length - 1);
    const old = chunk.filter(({ value }) => isPreParentKeyValue(keyValue(value)));
    if (old.length > 0) {
      db.transactionSync(() => {
        for (const { key, value } of old) db.putSync(key, [...(value as unknown[]).slice(0, at), ...withRootParent(keyValue(value))]);
      });
    }
    if (chunk.length < MIGRATION_CHUNK) return;
    start = chunk[chunk.length - 1]!.key; // inclusive: that record is migrated already
  }
}
