import { createHash } from "node:crypto";
import type { Change, ParentName } from "../core/change.js";

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
 * The store holds the state, not a log: one record per key (with its page
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
export type RankKey = [namespace: string, rank: number];
export type RankValue = [numPages: number, worldSize: number];
export type KeyKey = [namespace: string, key: string];
/** LongKeyValue is a long_keys record: the names, then a KeyValue. */
export type LongKeyValue = [namespace: string, key: string, ...value: KeyValue];
/** KeyValue is [complete, parent, rank, page, rank, page, ...]; before version 3, [complete, rank, page, ...]. */
export type KeyValue = [complete: number, ...rest: (ParentName | number)[]];
export type PageKey = [namespace: string, rank: number, page: number];
/** PageValue is a reservation's [key, expiresAtMs, parent] (no parent before version 3) or a drain's [key, untilMs]. */
export type PageValue = [key: string, atMs: number, parent?: ParentName];

/** Write is one put (value defined) or remove (value undefined). */
export interface Write {
  db: Exclude<DbName, "meta">;
  key: RankKey | KeyKey | PageKey | string;
  value: RankValue | KeyValue | LongKeyValue | PageValue | undefined;
}

/** writeOf encodes a change as the write that stores it. */
export function writeOf(change: Change): Write {
  switch (change.kind) {
    case "rank":
      return { db: "ranks", key: [change.namespace, change.rank], value: [change.numPages, change.worldSize] };
    case "unrank":
      return { db: "ranks", key: [change.namespace, change.rank], value: undefined };
    case "key":
      return keyWrite(change.namespace, change.key, [change.complete ? 1 : 0, change.parent, ...change.pages]);
    case "forget":
      return keyWrite(change.namespace, change.key, undefined);
    case "reserve":
      return { db: "reservations", key: [change.namespace, change.rank, change.page], value: [change.key, change.expiresAtMs, change.parent] };
    case "unreserve":
      return { db: "reservations", key: [change.namespace, change.rank, change.page], value: undefined };
    case "drain":
      return { db: "drains", key: [change.namespace, change.rank, change.page], value: [change.key, change.untilMs] };
    case "undrain":
      return { db: "drains", key: [change.namespace, change.rank, change.page], value: undefined };
  }
}

/** keyWrite puts (value defined) or removes a key record, in `keys` or, for long names, in `long_keys`. */
function keyWrite(namespace: string, key: string, value: KeyValue | undefined): Write {
  if (Buffer.byteLength(namespace) + Buffer.byteLength(key) <= PLAIN_KEY_BYTES) return { db: "keys", key: [namespace, key], value };
  const hash = createHash("sha256").update(namespace).update("\0").update(key).digest("base64");
  return { db: "long_keys", key: hash, value: value === undefined ? undefined : [namespace, key, ...value] };
}

/** keyChange decodes a stored key, of either layout (FORMAT_VERSION). */
export function keyChange([namespace, key]: KeyKey, value: KeyValue): Change {
  const parented = !isPreParentKeyValue(value);
  const pages = value.slice(parented ? 2 : 1) as number[];
  return { kind: "key", namespace, key, parent: parented ? (value[1] as ParentName) : "", complete: value[0] === 1, pages };
}

/** isPreParentKeyValue tells a key value of the layout before version 3: a page (a number), or nothing, after `complete`. */
export function isPreParentKeyValue(value: KeyValue): boolean {
  return value.length === 1 || typeof value[1] === "number";
}

/** withRootParent is a key value of the layout before version 3 in the current one, as a root. */
export function withRootParent([complete, ...pages]: KeyValue): KeyValue {
  return [complete, "", ...pages];
}

/** longKeyChange decodes a key stored in long_keys. */
export function longKeyChange([namespace, key, ...value]: LongKeyValue): Change {
  return keyChange([namespace, key], value);
}

/** reservationChange decodes a stored reservation. */
export function reservationChange([namespace, rank, page]: PageKey, [key, expiresAtMs, parent = ""]: PageValue): Change {
  return { kind: "reserve", namespace, rank, page, key, parent, expiresAtMs };
}

/** drainChange decodes a stored draining page. */
export function drainChange([namespace, rank, page]: PageKey, [key, untilMs]: PageValue): Change {
  return { kind: "drain", namespace, rank, page, key, untilMs };
}
