import { createHash } from "node:crypto";
import type { Change } from "../core/index.js";
import { formatOf, type RecordKey, type RecordValue, readerOf } from "../core/index.js";

/**
 * The on-disk layout of the LMDB store, all in one place. Keys are
 * lmdb-js ordered-binary arrays, values msgpack.
 *
 *   meta          "formatVersion" → FORMAT_VERSION, "serverId" → string
 *   ranks         [namespace, rank]        → [numPages, worldSize]
 *   keys          [namespace, key]         → [complete 0|1, parent, rank, page, rank, page, ...]
 *   long_keys     sha256(namespace NUL key) → [namespace, key, complete 0|1, parent, rank, page, ...]
 *   reservations  [namespace, rank, page]  → [key, expiresAtMs, parent]
 *   drains        [namespace, rank, page]  → [key, untilMs]
 *
 *   meta          ["dropping", namespace] → true: a drop under way (below)
 *   meta          ["unranking", namespace, rank] → true: a rank's drop under way (below)
 *
 * Each kind of change puts or removes one record (CHANGE_FORMATS), but a
 * drop, which removes every record of a namespace. A drop of more records
 * than one transaction should hold marks the namespace in meta first, in
 * the transaction that makes the drop durable, then removes the records in
 * chunks (ranks last), then lifts the mark; a store opened with a mark set
 * finishes the drop before anything reads it. The drop of one rank of
 * several (unrank) rewrites every key record of its namespace (it loses
 * its page there; rank-sweep.ts) the same way, in chunks under its mark,
 * the rank's record last. The
 * store holds the state, not a log: one record per key (with its page
 * on every rank, so recovery reads a key once, not once per rank), one per
 * reservation in flight and one per draining page. A FREE page has no record.
 *
 * LMDB keys are at most 1,978 bytes, so a key record whose namespace and key
 * together pass PLAIN_KEY_BYTES is stored in long_keys under a hash of
 * both, with the names in the value: every name within the server's limits
 * stores. Namespaces (at most 1,024 bytes, --max-key-bytes' ceiling) fit
 * the other tables' keys as they are.
 *
 * A parent is a key's prefix key as a ParentName: the key, "" for a root,
 * null for a parent that is gone.
 *
 * Versions: 1 had no long_keys (such records could not be stored); 2 adds
 * it; 3 adds the parent. A store of version 1 or 2 is migrated when opened
 * for writing (migrateParents): its key records get "" (a root: nothing
 * was known of parents) in chunks, then the version is written. The layout
 * of a key record tells itself (a number or nothing after `complete` is a
 * page, not a parent), so a migration cut short leaves a store that reads
 * right and migrates again; reservations without a parent read as roots.
 */
export const FORMAT_VERSION = 3;

/** PLAIN_KEY_BYTES bounds the UTF-8 bytes of namespace + key of a record kept in `keys`. */
export const PLAIN_KEY_BYTES = 1_000;

export const DB_NAMES = ["meta", "ranks", "keys", "long_keys", "reservations", "drains"] as const;

export type DbName = (typeof DB_NAMES)[number];

/** Write is one put (value defined) or remove (value undefined) of a record. */
export interface Write {
  db: DbName;
  key: RecordKey | string;
  value: RecordValue | undefined;
}

/** writeOf encodes a change as the write that stores it (CHANGE_FORMATS), a key record with long names in long_keys. */
export function writeOf(change: Change): Write {
  const format = formatOf(change);
  const key = format.key(change);
  const value = format.value?.(change);
  if (format.table === "namespace") throw new Error("a drop removes a namespace's records, not one (LmdbStore.commitApplied)");
  if (format.table !== "keys") return { db: format.table, key, value };
  const [namespace, name] = key as [string, string];
  if (Buffer.byteLength(namespace) + Buffer.byteLength(name) <= PLAIN_KEY_BYTES) return { db: "keys", key, value };
  const hash = createHash("sha256").update(namespace).update("\0").update(name).digest("base64");
  return { db: "long_keys", key: hash, value: value === undefined ? undefined : [namespace, name, ...value] };
}

/** READERS read each table's records back as changes. */
const READERS = { ranks: readerOf("ranks"), keys: readerOf("keys"), reservations: readerOf("reservations"), drains: readerOf("drains") };

/** storedChange decodes a record of a table, of any layout since version 1 (a long_keys record holds its names first). */
export function storedChange(db: Exclude<DbName, "meta">, key: unknown, value: unknown): Change {
  if (db !== "long_keys") return READERS[db](key as RecordKey, value as RecordValue);
  const [namespace, name, ...rest] = value as RecordValue;
  return READERS.keys([namespace as string, name as string], rest);
}

/** withRootParent is a key value of the layout before version 3 in the current one, as a root. */
export function withRootParent([complete, ...pages]: RecordValue): RecordValue {
  return [complete!, "", ...pages];
}
