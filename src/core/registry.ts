import type { Clock } from "./clock.js";
import { Deadlines } from "./deadlines.js";
import { MetadataError, Reason } from "./errors.js";
import { Journal } from "./journal.js";
import { Namespace } from "./namespace.js";
import type { Rank } from "./rank.js";
import { checkStateOptions, defaultStateOptions, type StateOptions } from "./state-options.js";
import { checkUint32 } from "./validate.js";

/**
 * Registry is what the modes of a state share (the commands, eviction,
 * recovery): its namespaces, its journal, its deadlines, and the effects
 * more than one mode has: finding a rank, dropping a key, processing what
 * is due. It is internal to the core; MetadataState and ReplayState are its
 * faces.
 */
export class Registry {
  readonly options: StateOptions;
  readonly namespaces = new Map<string, Namespace>();
  /** deadlines schedules reservation expiries, incomplete reclaims and drain ends, so expire() costs what is due. */
  readonly deadlines = new Deadlines();
  readonly journal: Journal;

  /**
   * @param clock the time source.
   * @param options the rules; missing ones take their defaults.
   * @param journaling whether to record changes (off for a state nobody persists).
   */
  constructor(
    readonly clock: Clock,
    options: Partial<StateOptions>,
    readonly journaling: boolean,
  ) {
    this.options = { ...defaultStateOptions, ...options };
    checkStateOptions(this.options);
    this.journal = new Journal(journaling);
  }

  /** newNamespace creates and registers a namespace under the eviction policy. */
  newNamespace(name: string, worldSize: number): Namespace {
    const ns = new Namespace(name, worldSize, this.options.eviction === "prefix", (entry) => this.journal.orphan(ns, entry));
    this.namespaces.set(name, ns);
    return ns;
  }

  /** rankOf finds an initialized rank or throws RANK_NOT_INITIALIZED. */
  rankOf(name: string, rankNo: number): { ns: Namespace; rank: Rank } {
    const ns = this.namespaces.get(name);
    const rank = ns?.ranks.get(rankNo);
    if (rank === undefined) {
      checkUint32(rankNo, "rank");
      throw new MetadataError(
        Reason.RANK_NOT_INITIALIZED,
        `rank ${rankNo} of namespace "${name}" is not initialized: call InitializeRank first (the server may have restarted without its state)`,
        { namespace: name, rank: rankNo },
      );
    }
    return { ns: ns!, rank };
  }

  /**
   * dropKey takes a key's confirmed pages away and frees them, or drains them
   * while it is read-leased (unless drainLeased is false: its pages go with
   * a dropped rank). The key stays in the registry while it has
   * reservations on other ranks.
   */
  dropKey(ns: Namespace, entry: number, now = this.clock(), drainLeased = true): void {
    const untilMs = ns.columns.leaseUntilMs[entry]!;
    const drains = drainLeased && untilMs > now && ns.columns.confirmed[entry]! > 0;
    // The key is named only for whoever needs it: the journal, or the drain that outlives the registry entry.
    const key = this.journal.on || drains ? ns.keyOf(entry) : "";
    this.journal.record({ kind: "forget", namespace: ns.name, key });
    this.unconfirm(ns, entry, drains ? untilMs : 0, key);
    ns.endLease(entry);
    ns.forgetIfEmpty(entry);
  }

  /**
   * unconfirm takes a key's confirmed pages away, and the key off its list:
   * each page is freed, or, with drainUntilMs, held DRAINING for `key` until
   * then (scheduled and journaled). A dropped key's pages (dropKey), or a
   * replayed key record's that replaces them (replayOne).
   */
  unconfirm(ns: Namespace, entry: number, drainUntilMs = 0, key = ""): void {
    if (!ns.unconfirmed(entry)) return;
    // dropConfirmed counts the key's pages down: the ranks after its last page are not read.
    for (let slot = 0; ns.columns.confirmed[entry]! > 0; slot++) {
      const rank = ns.slots[slot]!;
      const page = rank.confirmedPage(entry);
      if (page < 0) continue;
      if (drainUntilMs === 0) {
        rank.dropConfirmed(entry, page, undefined);
        continue;
      }
      rank.dropConfirmed(entry, page, { untilMs: drainUntilMs, key });
      this.deadlines.drain(ns, rank, page, drainUntilMs);
      this.journal.record({ kind: "drain", namespace: ns.name, rank: rank.rank, page, key, untilMs: drainUntilMs });
    }
  }

  /** expire processes every deadline that is due: expired reservations, stale incomplete keys, ended drains. */
  expire(): void {
    const now = this.clock();
    if (now < this.deadlines.nextMs) return;
    for (let due = this.deadlines.popDue(now); due !== undefined; due = this.deadlines.popDue(now)) {
      const ns = due.ns;
      if (due.kind === "reservations") {
        this.expireReservations(ns, due.rank, now);
        this.deadlines.armReservations(ns, due.rank);
      } else if (due.kind === "incomplete") {
        ns.reclaimDue(now, (entry) => {
          this.dropKey(ns, entry, now);
          ns.events.reclaimedIncompleteKeys++;
        });
        this.deadlines.armIncomplete(ns);
      } else if (due.rank.endDrain(due.page, due.atMs)) {
        this.journal.record({ kind: "undrain", namespace: ns.name, rank: due.rank.rank, page: due.page });
      }
    }
  }

  /** expireReservations frees the rank's reservations expired by now, remembering each as lapsed for a late confirmation. */
  private expireReservations(ns: Namespace, rank: Rank, now: number): void {
    rank.expireReservations(now, (page, entry) => {
      rank.lapse(page, ns.keyOf(entry));
      ns.forgetIfEmpty(entry);
      ns.events.expiredReservations++;
      this.journal.record({ kind: "unreserve", namespace: ns.name, rank: rank.rank, page });
    });
  }
}
