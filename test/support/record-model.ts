import type { Change } from "../../src/core/change.js";
import { ORPHANED } from "../../src/core/key-tree.js";
import type { ReplayState } from "../../src/core/replay-state.js";
import type { MetadataState } from "../../src/core/state.js";
import { namespacesOf } from "../../src/core/state.js";

/**
 * RecordModel is the store's record semantics in a few maps (what LMDB
 * keeps: one record per rank, key, reservation and draining page), for
 * property tests: apply the journal, then `stored()` is what a restart
 * restores, in restore's order.
 */
export class RecordModel {
  private readonly ranks = new Map<string, Change>();
  private readonly keys = new Map<string, Change>();
  private readonly reservations = new Map<string, Change>();
  private readonly drains = new Map<string, Change>();

  apply(change: Change): void {
    switch (change.kind) {
      case "rank":
        this.ranks.set(`${change.namespace}\0${change.rank}`, change);
        break;
      case "unrank":
        this.unrank(change);
        break;
      case "key":
        this.keys.set(`${change.namespace}\0${change.key}`, change);
        break;
      case "forget":
        this.keys.delete(`${change.namespace}\0${change.key}`);
        break;
      case "reserve":
        this.reservations.set(`${change.namespace}\0${change.rank}\0${change.page}`, change);
        break;
      case "unreserve":
        this.reservations.delete(`${change.namespace}\0${change.rank}\0${change.page}`);
        break;
      case "drain":
        this.drains.set(`${change.namespace}\0${change.rank}\0${change.page}`, change);
        break;
      case "undrain":
        this.drains.delete(`${change.namespace}\0${change.rank}\0${change.page}`);
        break;
      case "drop":
        for (const table of [this.ranks, this.keys, this.reservations, this.drains]) {
          for (const [key, record] of table) if (record.namespace === change.namespace) table.delete(key);
        }
        break;
    }
  }

  /**
   * unrank drops a rank of several: every key record of its namespace loses
   * its page there (one left with none goes), and one confirmed on the
   * required ranks left (the world size, else the ranks left) is complete.
   */
  private unrank({ namespace, rank }: Extract<Change, { kind: "unrank" }>): void {
    const left = [...this.ranks.values()].filter((r) => r.namespace === namespace && r.kind === "rank" && r.rank !== rank);
    this.ranks.delete(`${namespace}\0${rank}`);
    const worldSize = left[0]?.kind === "rank" ? left[0].worldSize : 0;
    const required = left.length === 0 ? Number.POSITIVE_INFINITY : worldSize > 0 ? worldSize : left.length;
    for (const [id, record] of this.keys) {
      if (record.namespace !== namespace || record.kind !== "key") continue;
      const pages: number[] = [];
      for (let i = 0; i < record.pages.length; i += 2) if (record.pages[i] !== rank) pages.push(record.pages[i]!, record.pages[i + 1]!);
      if (pages.length === 0) this.keys.delete(id);
      else this.keys.set(id, { ...record, pages, complete: record.complete || pages.length / 2 >= required });
    }
  }

  /** stored is every record as the change that restores it: ranks first. */
  stored(): Change[] {
    return [...this.ranks.values(), ...this.keys.values(), ...this.reservations.values(), ...this.drains.values()];
  }
}

/**
 * dumpState describes a state by what a restart must give back, in a
 * canonical order: per namespace its counts, per rank its page counts,
 * reservations and draining pages, per key its pages, completeness, read
 * lease and reclaim deadline. (Not the LRU order: the store does not keep
 * it.) Without `timing` it leaves out what a restart sets anew (read
 * leases, reclaim deadlines, how long pages drain): what the store holds.
 */
export function dumpState(state: MetadataState, timing = true): unknown {
  return [...namespacesOf(state).values()]
    .sort((a, b) => (a.name < b.name ? -1 : 1))
    .map((ns) => ({
      name: ns.name,
      worldSize: ns.worldSize,
      confirmedKeys: ns.confirmedKeys,
      complete: ns.completeKeys,
      incomplete: ns.incomplete.size,
      registered: ns.keys.size,
      ranks: [...ns.ranks.values()]
        .sort((a, b) => a.rank - b.rank)
        .map((rank) => ({
          rank: rank.rank,
          numPages: rank.numPages,
          free: rank.freePages,
          reserved: rank.reservedPages,
          used: rank.usedPages,
          reservations: [...rank.reservations].map((page) => `${page} ${ns.keyOf(rank.reservedBy(page))} ${rank.expiresAtMs(page)}`).sort(),
          firstExpiryMs: rank.firstExpiryMs(),
          draining: [...rank.draining].map(([page, { untilMs, key }]) => `${page} ${key}${timing ? ` ${untilMs}` : ""}`).sort(),
        })),
      keys: [...ns.keys.live()]
        .filter((entry) => ns.columns.confirmed[entry]! > 0)
        .map((entry) => {
          const pairs = ns.confirmedPages(entry);
          const pages: string[] = [];
          for (let i = 0; i < pairs.length; i += 2) pages.push(`${pairs[i]}:${pairs[i + 1]}`);
          const complete = ns.isComplete(entry);
          return {
            key: ns.keyOf(entry),
            pages: pages.sort(),
            complete,
            leaseUntilMs: timing ? ns.columns.leaseUntilMs[entry] : undefined,
            reclaimAtMs: timing && !complete ? ns.columns.reclaimAtMs[entry] : undefined,
          };
        })
        .sort((a, b) => (a.key < b.key ? -1 : 1)),
      // Every registered key's parent (the prefix tree): "key ← parent reach", "-" for a root, "gone" for an orphan.
      parents: [...ns.keys.live()]
        .map((entry) => {
          const parent = ns.tree.parentOf(entry);
          const named = parent >= 0 ? ns.keyOf(parent) : ns.tree.reachOf(entry) === ORPHANED ? "gone" : "-";
          return `${ns.keyOf(entry)} ← ${named} ${ns.tree.reachOf(entry)}`;
        })
        .sort(),
    }));
}

/** shipper ships a leader's journal as a cluster does: each change to the store (its records) and to a standby's replay. */
export function shipper(leader: MetadataState, store: RecordModel, replay: ReplayState): () => void {
  return () => {
    for (const change of leader.takeChanges()) {
      store.apply(change);
      replay.apply(change);
    }
  };
}
