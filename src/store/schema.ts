import type { Change } from "../core/change.js";

/**
 * The on-disk layout of the LMDB store, all in one place. Keys are
 * lmdb-js ordered-binary arrays, values msgpack.
 *
 *   meta      "formatVersion" → FORMAT_VERSION, "serverId" → string
 *   ranks     [namespace, rank]        → [numPages, worldSize]
 *   pages     [namespace, rank, page]  → [PageRecord state, key, atMs]
 *             (a FREE page has no record)
 *   complete  [namespace, key]         → true
 *
 * A page record is the page's state after the last change to it, so the
 * store holds exactly the state, not a log: its size follows the number of
 * held pages, and recovery reads each page once.
 */
export const FORMAT_VERSION = 1;

export const DB_NAMES = ["meta", "ranks", "pages", "complete"] as const;

/** PageRecord is the stored state of a held page. */
export const enum PageRecord {
  /** Reserved: atMs is the reservation's expiry. */
  Reserved = 1,
  /** Used by a confirmed key: atMs is 0. */
  Used = 2,
  /** Held by a deleted, read-leased key: atMs is the end of the lease. */
  Draining = 3,
}

export type RankKey = [namespace: string, rank: number];
export type RankValue = [numPages: number, worldSize: number];
export type PageKey = [namespace: string, rank: number, page: number];
export type PageValue = [state: PageRecord, key: string, atMs: number];
export type CompleteKey = [namespace: string, key: string];

/** Write is one put (value defined) or remove (value undefined) in a named database. */
export interface Write {
  db: "ranks" | "pages" | "complete";
  key: RankKey | PageKey | CompleteKey;
  value: RankValue | PageValue | true | undefined;
}

/** writeOf encodes a change as the write that stores it. */
export function writeOf(change: Change): Write {
  switch (change.kind) {
    case "rank":
      return { db: "ranks", key: [change.namespace, change.rank], value: [change.numPages, change.worldSize] };
    case "reserve":
      return { db: "pages", key: [change.namespace, change.rank, change.page], value: [PageRecord.Reserved, change.key, change.expiresAtMs] };
    case "use":
      return { db: "pages", key: [change.namespace, change.rank, change.page], value: [PageRecord.Used, change.key, 0] };
    case "drain":
      return { db: "pages", key: [change.namespace, change.rank, change.page], value: [PageRecord.Draining, change.key, change.untilMs] };
    case "free":
      return { db: "pages", key: [change.namespace, change.rank, change.page], value: undefined };
    case "complete":
      return { db: "complete", key: [change.namespace, change.key], value: true };
    case "forget":
      return { db: "complete", key: [change.namespace, change.key], value: undefined };
  }
}

/** pageChange decodes a stored page as the change that restores it. */
export function pageChange([namespace, rank, page]: PageKey, [state, key, atMs]: PageValue): Change {
  switch (state) {
    case PageRecord.Reserved:
      return { kind: "reserve", namespace, rank, page, key, expiresAtMs: atMs };
    case PageRecord.Used:
      return { kind: "use", namespace, rank, page, key };
    case PageRecord.Draining:
      return { kind: "drain", namespace, rank, page, key, untilMs: atMs };
    default:
      throw new Error(`page ${page} of rank ${rank} of namespace "${namespace}" has an unknown state ${String(state)}`);
  }
}
