import type { Clock } from "./clock.js";
import { Deadlines } from "./deadlines.js";
import { MetadataError, Reason } from "./errors.js";
import { Journal } from "./journal.js";
import { KeyScope } from "./key-scope.js";
import { Namespace } from "./namespace.js";
import type { Rank } from "./rank.js";
import { type ShardPart, WHOLE } from "./shards.js";
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
  /** namespaces are every namespace by internal name: a namespace of KEY_SCOPE_RANK is one per rank (key-scope.ts). */
  readonly namespaces = new Map<string, Namespace>();
  /** rankScoped are the namespaces of KEY_SCOPE_RANK, by name, each rank's own by rank. */
  private readonly rankScoped = new Map<string, Map<number, Namespace>>();
  /** scopedParts counts the namespaces of `namespaces` that are one rank of a namespace of KEY_SCOPE_RANK. */
  private scopedParts = 0;
  /** deadlines schedules reservation expiries, incomplete reclaims and drain ends, so expire() costs what is due. */
  readonly deadlines = new Deadlines();
  readonly journal: Journal;
  /** part is the part of every rank's pages this state hands out: its shard's (options shards and shard), or all (WHOLE). */
  readonly part: ShardPart;

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
    this.part = this.options.shards === 1 ? WHOLE : { count: this.options.shards, index: this.options.shard };
    this.journal = new Journal(journaling);
  }

  /** newNamespace creates and registers a namespace (or one rank's of KEY_SCOPE_RANK, by its internal name) under the eviction policy. */
  newNamespace(name: string, worldSize: number): Namespace {
    const ns = new Namespace(name, worldSize, this.options.eviction === "prefix", (entry) => this.journal.orphan(ns, entry), this.part);
    this.namespaces.set(name, ns);
    if (ns.scopedRank !== undefined) {
      const ranks = this.rankScoped.get(ns.label) ?? new Map<number, Namespace>();
      this.rankScoped.set(ns.label, ranks);
      ranks.set(ns.scopedRank, ns);
      this.scopedParts++;
    }
    return ns;
  }

  /** deleteNamespace forgets a namespace that holds no rank any more. */
  deleteNamespace(ns: Namespace): void {
    if (!this.namespaces.delete(ns.name) || ns.scopedRank === undefined) return;
    const ranks = this.rankScoped.get(ns.label)!;
    ranks.delete(ns.scopedRank);
    if (ranks.size === 0) this.rankScoped.delete(ns.label);
    this.scopedParts--;
  }

  /**
   * dropNamespace forgets a namespace whole, in a time that does not grow
   * with its keys: it leaves the registry, its deadlines are passed over
   * when due (expire), and one change records it (drop).
   */
  dropNamespace(ns: Namespace): void {
    this.deleteNamespace(ns);
    this.journal.record({ kind: "drop", namespace: ns.name });
  }

  /** scopeOf is the KeyScope of the namespace a client names; UNSPECIFIED when it has none. */
  scopeOf(name: string): KeyScope {
    if (this.namespaces.has(name)) return KeyScope.NAMESPACE;
    return this.rankScoped.has(name) ? KeyScope.RANK : KeyScope.UNSPECIFIED;
  }

  /** parts are the namespaces a client's name stands for: itself, or one per rank for KEY_SCOPE_RANK, by rank; none when unknown. */
  parts(name: string): Namespace[] {
    const ns = this.namespaces.get(name);
    if (ns !== undefined) return [ns];
    const ranks = this.rankScoped.get(name);
    return ranks === undefined ? [] : [...ranks.values()].sort((a, b) => a.scopedRank! - b.scopedRank!);
  }

  /** names are the namespaces by the names clients give, each once. */
  names(): string[] {
    const names = [...this.rankScoped.keys()];
    for (const ns of this.namespaces.values()) if (ns.scopedRank === undefined) names.push(ns.name);
    return names;
  }

  /** namespaceCount is the number of namespaces clients see (a namespace of KEY_SCOPE_RANK is one). */
  get namespaceCount(): number {
    return this.namespaces.size - this.scopedParts + this.rankScoped.size;
  }

  /** find is the namespace and the rank a call names, undefined when the rank is not initialized. */
  find(name: string, rankNo: number): { ns: Namespace; rank: Rank } | undefined {
    const ns = this.namespaces.get(name) ?? this.rankScoped.get(name)?.get(rankNo);
    const rank = ns?.ranks.get(rankNo);
    return rank === undefined ? undefined : { ns: ns!, rank };
  }

  /** rankOf finds an initialized rank or throws RANK_NOT_INITIALIZED. */
  rankOf(name: string, rankNo: number): { ns: Namespace; rank: Rank } {
    const found = this.find(name, rankNo);
    if (found === undefined) {
      checkUint32(rankNo, "rank");
      throw new MetadataError(
        Reason.RANK_NOT_INITIALIZED,
        `rank ${rankNo} of namespace "${name}" is not initialized: call InitializeRank first (the server may have restarted without its state)`,
        { namespace: name, rank: rankNo },
      );
    }
    return found;
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
      // A namespace dropped whole (a reset, a Clear) leaves its deadlines behind: they are passed over, not disarmed one by one.
      if (this.namespaces.get(ns.name) !== ns) continue;
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
