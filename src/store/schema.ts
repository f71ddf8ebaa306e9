import type { Change } from "../core/change.js";

/**
 * The on-disk layout of the LMDB store, all in one place. Keys are
 * lmdb-js ordered-binary arrays, values msgpack.
 *
 *   meta          "formatVersion" → FORMAT_VERSION, "serverId" → string
 *   ranks         [namespace, rank]        → [numPages, worldSize]
 *   keys          [namespace, key]         → [complete 0|1, rank, page, rank, page, ...]
 *   reservations  [namespace, rank, page]  → [key, expiresAtMs]
 *   drains        [namespace, rank, page]  → [key, untilMs]
 *
 * The store holds the state, not a log: one record per key (with its page
 * on every rank, so recovery reads a key once, not once per rank), one per
 * reservation in flight and one per draining page. A FREE page has no record.
 */
export const FORMAT_VERSION = 1;

export const DB_NAMES = ["meta", "ranks", "keys", "reservations", "drains"] as const;

export type DbName = (typeof DB_NAMES)[number];
export type RankKey = [namespace: string, rank: number];
export type RankValue = [numPages: number, worldSize: number];
export type KeyKey = [namespace: string, key: string];
/** KeyValue is [complete, rank, page, rank, page, ...]. */
export type KeyValue = number[];
export type PageKey = [namespace: string, rank: number, page: number];
export type PageValue = [key: string, atMs: number];

/** Write is one put (value defined) or remove (value undefined). */
export interface Write {
  db: Exclude<DbName, "meta">;
  key: RankKey | KeyKey | PageKey;
  value: RankValue | KeyValue | PageValue | undefined;
}

/** writeOf encodes a change as the write that stores it. */
export function writeOf(change: Change): Write {
  switch (change.kind) {
    case "rank":
      return { db: "ranks", key: [change.namespace, change.rank], value: [change.numPages, change.worldSize] };
    case "key":
      return { db: "keys", key: [change.namespace, change.key], value: [change.complete ? 1 : 0, ...change.pages] };
    case "forget":
      return { db: "keys", key: [change.namespace, change.key], value: undefined };
    case "reserve":
      return { db: "reservations", key: [change.namespace, change.rank, change.page], value: [change.key, change.expiresAtMs] };
    case "unreserve":
      return { db: "reservations", key: [change.namespace, change.rank, change.page], value: undefined };
    case "drain":
      return { db: "drains", key: [change.namespace, change.rank, change.page], value: [change.key, change.untilMs] };
    case "undrain":
      return { db: "drains", key: [change.namespace, change.rank, change.page], value: undefined };
  }
}

/** keyChange decodes a stored key. */
export function keyChange([namespace, key]: KeyKey, [complete, ...pages]: KeyValue): Change {
  return { kind: "key", namespace, key, complete: complete === 1, pages };
}

/** reservationChange decodes a stored reservation. */
export function reservationChange([namespace, rank, page]: PageKey, [key, expiresAtMs]: PageValue): Change {
  return { kind: "reserve", namespace, rank, page, key, expiresAtMs };
}

/** drainChange decodes a stored draining page. */
export function drainChange([namespace, rank, page]: PageKey, [key, untilMs]: PageValue): Change {
  return { kind: "drain", namespace, rank, page, key, untilMs };
}
