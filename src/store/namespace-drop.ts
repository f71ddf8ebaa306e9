import type { Database } from "lmdb";
import type { Change, RecordKey, RecordValue } from "../core/index.js";
import type { DbName, Write } from "./schema.js";

/**
 * A drop in the store: every record of a namespace removed, a chunk per
 * transaction, under a mark in meta that a store opened again finishes
 * (schema.ts; LmdbStore.dropInSteps issues the chunks).
 */

/** StoreDbs are the store's tables by name. */
export type StoreDbs = Record<DbName, Database>;

/** DROP_CHUNK is the number of records a drop removes per transaction (and event turn). */
export const DROP_CHUNK = 5_000;

/** isDrop tells a drop, a change of a whole namespace. */
export function isDrop(change: Change): change is Extract<Change, { kind: "drop" }> {
  return change.kind === "drop";
}

/** droppingMark is the meta key that marks a drop of namespace under way (schema.ts). */
export function droppingMark(namespace: string): [string, string] {
  return ["dropping", namespace];
}

/**
 * namespaceRecords lists up to `limit` records of a namespace as their
 * removes, ranks last (a restore of a drop cut short finds every record's
 * rank). Records under long names are found by their value: a scan of
 * long_keys, which holds the few keys past PLAIN_KEY_BYTES.
 */
export function namespaceRecords(dbs: StoreDbs, namespace: string, limit: number): Write[] {
  const removes: Write[] = [];
  for (const db of ["reservations", "drains", "keys", "long_keys", "ranks"] as const) {
    if (db === "long_keys") {
      for (const { key, value } of dbs.long_keys.getRange()) {
        if (removes.length >= limit) return removes;
        if ((value as RecordValue)[0] === namespace) removes.push({ db, key: key as string, value: undefined });
      }
      continue;
    }
    for (const key of dbs[db].getKeys({ start: [namespace], limit: limit - removes.length })) {
      if ((key as RecordKey)[0] !== namespace) break;
      removes.push({ db, key: key as RecordKey, value: undefined });
    }
    if (removes.length >= limit) return removes;
  }
  return removes;
}

/** finishDrops ends the drops a stop cut short (their marks are set): a chunk per transaction, then the mark (schema.ts). */
export function finishDrops(dbs: StoreDbs): void {
  for (const key of [...dbs.meta.getKeys({ start: ["dropping"] })]) {
    if (!Array.isArray(key) || key[0] !== "dropping") break;
    const namespace = key[1] as string;
    for (let chunk = namespaceRecords(dbs, namespace, DROP_CHUNK); chunk.length > 0; chunk = namespaceRecords(dbs, namespace, DROP_CHUNK)) {
      dbs.meta.transactionSync(() => {
        for (const { db, key } of chunk) (db === "meta" ? dbs.meta : dbs[db]).removeSync(key);
      });
    }
    dbs.meta.removeSync(key);
  }
}
