import type { Change, RecordKey, RecordValue } from "../core/index.js";
import type { StoreDbs } from "./namespace-drop.js";
import { storedChange, type Write, writeOf } from "./schema.js";

/**
 * A rank's drop in the store (an "unrank" change: the drop of one rank of
 * several): every key record of its namespace rewritten, a chunk per
 * transaction, under a mark in meta that a store opened again finishes
 * (schema.ts; LmdbStore.dropInSteps issues the chunks; the core's
 * removeRank, rank-removal.ts, is the same effect in memory).
 */

/** SWEEP_CHUNK is the number of key records a rank's drop reads per transaction (and event turn): each is decoded and most are written again, so fewer than a namespace's drop removes (DROP_CHUNK). */
export const SWEEP_CHUNK = 2_000;

/** Unrank is the change a sweep applies. */
export type Unrank = Extract<Change, { kind: "unrank" }>;

/** isUnrank tells the drop of a rank, which rewrites its namespace's key records. */
export function isUnrank(change: Change): change is Unrank {
  return change.kind === "unrank";
}

/** unrankingMark is the meta key that marks the sweep of a dropped rank under way (schema.ts). */
export function unrankingMark({ namespace, rank }: Unrank): [string, string, number] {
  return ["unranking", namespace, rank];
}

/**
 * RankSweep lists the writes of a rank's drop, `limit` records at a time
 * (next): a key record loses its page on the rank (one left with none is
 * removed), and one confirmed on the required ranks left is complete (the
 * namespace's world size, else the ranks left: Namespace.requiredRanks).
 * The rank's own record goes last. It reads the store as it goes, so each
 * chunk must be written before the next is asked for; a sweep begun again
 * from the start after a stop gives the same records.
 */
export class RankSweep {
  private after: RecordKey | undefined;
  private done = false;
  private readonly required: number;

  constructor(
    private readonly dbs: StoreDbs,
    private readonly change: Unrank,
  ) {
    let left = 0;
    let worldSize = 0;
    for (const { key, value } of dbs.ranks.getRange({ start: [change.namespace] })) {
      if ((key as RecordKey)[0] !== change.namespace) break;
      if ((key as RecordKey)[1] === change.rank) continue;
      left++;
      worldSize = (value as RecordValue)[1] as number;
    }
    this.required = left === 0 ? Number.POSITIVE_INFINITY : worldSize > 0 ? worldSize : left;
  }

  /** next lists the writes of up to `limit` key records read (the last chunk with the rank's removal); undefined once the sweep is done. */
  next(limit: number): Write[] | undefined {
    if (this.done) return undefined;
    const writes: Write[] = [];
    const namespace = this.change.namespace;
    let read = 0;
    const range = this.after === undefined ? { start: [namespace] } : { start: this.after, exclusiveStart: true };
    for (const { key, value } of this.dbs.keys.getRange({ ...range, limit })) {
      if ((key as RecordKey)[0] !== namespace) break;
      read++;
      this.after = key as RecordKey;
      this.sweep(storedChange("keys", key, value), writes);
    }
    if (read === limit) return writes;
    // Keys past PLAIN_KEY_BYTES are few: their table is read whole, with the last chunk.
    for (const { value } of this.dbs.long_keys.getRange()) {
      if ((value as RecordValue)[0] === namespace) this.sweep(storedChange("long_keys", undefined, value), writes);
    }
    this.done = true;
    writes.push(writeOf(this.change));
    return writes;
  }

  /** sweep adds the write that a key's record needs, if any. */
  private sweep(record: Change, writes: Write[]): void {
    if (record.kind !== "key") return;
    const { rank } = this.change;
    const pages: number[] = [];
    for (let i = 0; i < record.pages.length; i += 2) if (record.pages[i] !== rank) pages.push(record.pages[i]!, record.pages[i + 1]!);
    const complete = record.complete || pages.length / 2 >= this.required;
    if (pages.length === record.pages.length && complete === record.complete) return;
    writes.push(writeOf(pages.length === 0 ? { kind: "forget", namespace: record.namespace, key: record.key } : { ...record, pages, complete }));
  }
}

/** finishSweeps ends the sweeps of dropped ranks that a stop cut short (their marks are set): a chunk per transaction, then the mark. */
export function finishSweeps(dbs: StoreDbs, chunk: number): void {
  for (const key of [...dbs.meta.getKeys({ start: ["unranking"] })]) {
    if (!Array.isArray(key) || key[0] !== "unranking") break;
    const sweep = new RankSweep(dbs, { kind: "unrank", namespace: key[1] as string, rank: key[2] as number });
    for (let writes = sweep.next(chunk); writes !== undefined; writes = sweep.next(chunk)) {
      dbs.meta.transactionSync(() => {
        for (const { db, key, value } of writes) {
          const table = db === "meta" ? dbs.meta : dbs[db];
          if (value === undefined) table.removeSync(key);
          else table.putSync(key, value);
        }
      });
    }
    dbs.meta.removeSync(key);
  }
}
