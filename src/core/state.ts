import { AllocationStatus, Role } from "../../gen/hf3fs/metadata/v1/metadata_pb.js";
import type { Change } from "./change.js";
import type { Clock } from "./clock.js";
import { Deadlines } from "./deadlines.js";
import { invalidArgument, limitExceeded, MetadataError, Reason } from "./errors.js";
import type { KeyList, Keys } from "./key-list.js";
import { addPage, confirmedPage, confirmedRanks, type KeyRecord, NO_PAGES, newKeyRecord, type Reservation, reservationAt } from "./key-record.js";
import { Namespace } from "./namespace.js";
import type { NamespaceCounts } from "./namespace-counters.js";
import { defaultStateOptions, MAX_NUM_PAGES, type StateOptions } from "./options.js";
import type { Rank } from "./rank.js";
import { checkCount, checkPages, checkSameLength, checkUint32, keyListFor, namespaceName } from "./validate.js";

export { AllocationStatus, Role };

const NO_CHANGES: readonly Change[] = Object.freeze([]);

/** InitializeRankResult describes a rank after InitializeRank. */
export interface InitializeRankResult {
  created: boolean;
  numPages: number;
  freePages: number;
}

/** AllocateResult gives a page and a status per key, in request order. */
export interface AllocateResult {
  pages: number[];
  statuses: AllocationStatus[];
}

/** ConfirmResult counts what a ConfirmWrite changed. */
export interface ConfirmResult {
  confirmed: number;
  released: number;
  /** completed are the positions of the keys this call made complete. */
  completed: number[];
}

/** RankStatsView counts the pages of a rank. */
export interface RankStatsView {
  rank: number;
  numPages: number;
  freePages: number;
  reservedPages: number;
  usedPages: number;
}

/** NamespaceStatsView counts the pages of a namespace's ranks, and its NAMESPACE_COUNTERS. */
export interface NamespaceStatsView extends NamespaceCounts {
  namespace: string;
  worldSize: number;
  ranks: RankStatsView[];
}

/** Replay applies stored changes to a state, then readies it to serve (MetadataState.replaying). */
export interface Replay {
  apply(change: Change): void;
  takeOver(): void;
}

/** RestartTerms are what a state grants as it starts to serve after a restart or a takeover (MetadataState.restartTerms). */
interface RestartTerms {
  leaseUntilMs: number;
  reclaimAtMs: number;
}

/**
 * MetadataState is the whole state machine: namespaces of ranks of pages,
 * the key registry, reservations, read leases and eviction.
 *
 * It is synchronous and does no I/O: each operation validates its whole
 * input, then applies all of it, so it is atomic. Time comes from the
 * injected clock; due deadlines (expired reservations, reclaimed incomplete
 * keys, ended drains) are processed at the start of every operation (and by
 * `expire`). Every durable effect is appended to a journal
 * that the caller takes with `takeChanges` and persists before replying.
 */
export class MetadataState {
  readonly options: StateOptions;
  private readonly namespaces = new Map<string, Namespace>();
  /** deadlines schedules reservation expiries, incomplete reclaims and drain ends, so expire() costs what is due. */
  private readonly deadlines = new Deadlines();
  private changes: Change[] = [];

  /**
   * @param clock the time source.
   * @param options the rules; missing ones take their defaults.
   * @param journal whether to record changes (off for a state nobody persists).
   */
  constructor(
    private readonly clock: Clock,
    options: Partial<StateOptions> = {},
    private readonly journal = true,
  ) {
    this.options = { ...defaultStateOptions, ...options };
  }

  /** namespaceViews exposes the namespaces read-only, for inspection and invariant checks. */
  get namespaceViews(): ReadonlyMap<string, Namespace> {
    return this.namespaces;
  }

  /** takeChanges returns the changes recorded since the last call, in order; the caller owns the array. */
  takeChanges(): readonly Change[] {
    if (this.changes.length === 0) return NO_CHANGES;
    const changes = this.changes;
    this.changes = [];
    return changes;
  }

  /**
   * initializeRank creates a rank, or checks that it exists with the same
   * parameters. A scheduler keeps no state; any other role (unspecified
   * included) is a worker.
   */
  initializeRank(namespace: string, rankNo: number, numPages: number, worldSize: number, role: Role = Role.WORKER): InitializeRankResult {
    const name = namespaceName(namespace, this.options);
    checkUint32(rankNo, "rank");
    checkUint32(worldSize, "world_size");
    this.expire();
    if (role === Role.SCHEDULER) return { created: false, numPages: 0, freePages: 0 };
    if (!Number.isInteger(numPages) || numPages < 1 || numPages > MAX_NUM_PAGES) {
      throw invalidArgument("num_pages", `num_pages must be from 1 to ${MAX_NUM_PAGES} for a worker, got ${numPages}`, {
        namespace: name,
        rank: rankNo,
      });
    }
    if (worldSize > 0 && rankNo >= worldSize) {
      throw invalidArgument("rank", `rank ${rankNo} is not below world_size ${worldSize}`, { namespace: name, rank: rankNo });
    }
    if (worldSize > this.options.maxRanksPerNamespace) {
      throw limitExceeded(
        "world_size",
        `world_size ${worldSize} is more than the limit of ${this.options.maxRanksPerNamespace} ranks per namespace (--max-ranks-per-namespace)`,
        {
          namespace: name,
          rank: rankNo,
        },
      );
    }
    let ns = this.namespaces.get(name);
    if (ns !== undefined && ns.worldSize !== worldSize) {
      throw new MetadataError(Reason.RANK_CONFIG_MISMATCH, `namespace "${name}" has world_size ${ns.worldSize}, not ${worldSize}`, {
        namespace: name,
        rank: rankNo,
        field: "world_size",
      });
    }
    const existing = ns?.ranks.get(rankNo);
    if (existing !== undefined) {
      if (existing.numPages !== numPages) {
        throw new MetadataError(Reason.RANK_CONFIG_MISMATCH, `rank ${rankNo} of namespace "${name}" has ${existing.numPages} pages, not ${numPages}`, {
          namespace: name,
          rank: rankNo,
          field: "num_pages",
        });
      }
      return { created: false, numPages, freePages: existing.pool.freePages };
    }
    if (ns === undefined && this.namespaces.size >= this.options.maxNamespaces) {
      throw limitExceeded("namespace", `the server has ${this.namespaces.size} namespaces, the limit (--max-namespaces)`, { namespace: name, rank: rankNo });
    }
    if (ns !== undefined && ns.ranks.size >= this.options.maxRanksPerNamespace) {
      throw limitExceeded("rank", `namespace "${name}" has ${ns.ranks.size} ranks, the limit (--max-ranks-per-namespace)`, { namespace: name, rank: rankNo });
    }
    if (ns === undefined) {
      ns = new Namespace(name, worldSize);
      this.namespaces.set(name, ns);
    }
    ns.addRank(rankNo, numPages);
    this.record({ kind: "rank", namespace: name, rank: rankNo, numPages, worldSize });
    return { created: true, numPages, freePages: numPages };
  }

  /**
   * batchAllocate gives each key a page on a rank: its confirmed page
   * (EXISTING), its active reservation renewed (RESERVED), a free page newly
   * reserved (NEW), evicting least recently used complete keys when none is
   * free, or none (NO_SPACE).
   */
  batchAllocate(namespace: string, rankNo: number, keyBatch: Keys, prefixKeys: Keys = []): AllocateResult {
    const name = namespaceName(namespace, this.options);
    const keys = keyListFor(keyBatch, "keys", this.options);
    if (prefixKeys.length > 0) checkSameLength(keys, "keys", prefixKeys, "prefix_keys");
    this.expire();
    const { ns, rank } = this.rankOf(name, rankNo);
    const now = this.clock();
    const expiresAtMs = now + this.options.reservationTtlMs;
    const pages = new Array<number>(keys.length);
    const statuses = new Array<AllocationStatus>(keys.length);
    // The keys of this batch, built on the first eviction: none of them may be evicted for another.
    // (A key repeated in the batch finds the reservation its first position made: same page, RESERVED.)
    let batch: Set<KeyRecord> | undefined;
    const found = ns.findAll(keys);
    for (let i = 0; i < keys.length; i++) {
      const record = found[i] ?? ns.recordAt(keys, i);
      const usedPage = confirmedPage(record, rank.slot);
      if (usedPage >= 0) {
        ns.touch(record);
        pages[i] = usedPage;
        statuses[i] = AllocationStatus.EXISTING;
        continue;
      }
      let reservation = reservationAt(record, rank.slot);
      if (reservation !== undefined) {
        if (reservation.expiresAtMs !== expiresAtMs) {
          rank.renew(reservation, expiresAtMs);
          this.recordReserve(ns, rank, reservation);
        }
        pages[i] = reservation.page;
        statuses[i] = AllocationStatus.RESERVED;
        continue;
      }
      reservation = rank.reserveFree(record, expiresAtMs);
      if (reservation === undefined) {
        // (The batch's new records hold reservations, which eviction never takes.)
        batch ??= new Set(found.filter((r) => r !== undefined));
        if (this.evictFor(ns, rank, batch, now)) reservation = rank.reserveFree(record, expiresAtMs);
      }
      if (reservation === undefined) {
        ns.forgetIfEmpty(record);
        pages[i] = -1;
        statuses[i] = AllocationStatus.NO_SPACE;
        continue;
      }
      this.recordReserve(ns, rank, reservation);
      pages[i] = reservation.page;
      statuses[i] = AllocationStatus.NEW;
    }
    this.deadlines.armReservations(ns, rank);
    return { pages, statuses };
  }

  /**
   * confirmWrite makes each (keys[i], pages[i]) USED and frees the RESERVED
   * pages of pagesToRelease. The whole batch is checked first; on any error
   * nothing changes.
   */
  confirmWrite(namespace: string, rankNo: number, keyBatch: Keys, pages: readonly number[], pagesToRelease: readonly number[] = []): ConfirmResult {
    const name = namespaceName(namespace, this.options);
    const keys = keyListFor(keyBatch, "keys", this.options);
    checkSameLength(keys, "keys", pages, "pages");
    checkCount(pagesToRelease, "pages_to_release", this.options);
    this.expire();
    const { ns, rank } = this.rankOf(name, rankNo);
    const subject = { namespace: name, rank: rankNo };
    checkPages(pages, "pages", rank.numPages, subject);
    checkPages(pagesToRelease, "pages_to_release", rank.numPages, subject);
    const records = this.checkConfirmable(ns, rank, keys, pages, pagesToRelease, subject);

    const now = this.clock();
    const result: ConfirmResult = { confirmed: 0, released: 0, completed: [] };
    for (let i = 0; i < keys.length; i++) {
      const page = pages[i]!;
      // A key repeated in the batch, or confirmed through a lapse, may have got its record at an earlier position.
      const record = records[i] ?? ns.recordAt(keys, i);
      if (confirmedPage(record, rank.slot) === page) continue;
      const firstPage = record.pages.length === 0;
      if (rank.confirm(record, page, reservationAt(record, rank.slot)) && this.journal) this.record({ kind: "unreserve", namespace: name, rank: rankNo, page });
      addPage(record, rank.slot, page);
      result.confirmed++;
      if (firstPage) {
        ns.confirmedKeys++;
        record.reclaimAtMs = now + this.options.incompleteTtlMs;
      }
      if (!record.complete && confirmedRanks(record) >= ns.requiredRanks) {
        if (!firstPage) ns.incomplete.delete(record);
        this.markComplete(ns, record);
        result.completed.push(i);
      } else if (firstPage) {
        ns.incomplete.add(record);
      }
      this.recordKey(ns, record);
    }
    this.deadlines.armIncomplete(ns);
    for (const page of pagesToRelease) {
      const reservation = rank.reservationOf(page);
      if (reservation === undefined) continue;
      rank.releaseReservation(reservation);
      ns.forgetIfEmpty(reservation.record);
      this.record({ kind: "unreserve", namespace: name, rank: rankNo, page });
      result.released++;
    }
    return result;
  }

  /**
   * checkConfirmable throws unless every confirmation and release of a batch
   * can be applied, and returns each position's key record as it was (so the
   * apply loop does not look them up again). Two positions cannot claim one
   * page (a page has one holder), and a key can match two pages only through
   * two lapsed reservations, so only those are tracked.
   */
  private checkConfirmable(
    ns: Namespace,
    rank: Rank,
    keys: KeyList,
    pages: readonly number[],
    pagesToRelease: readonly number[],
    subject: { namespace: string; rank: number },
  ): (KeyRecord | undefined)[] {
    let lapsedPageOfKey: Map<string, number> | undefined;
    const records = ns.findAll(keys);
    for (let i = 0; i < keys.length; i++) {
      const page = pages[i]!;
      const record = records[i];
      const usedPage = confirmedPage(record, rank.slot);
      const reservation = reservationAt(record, rank.slot);
      if (usedPage >= 0 ? usedPage === page : reservation?.page === page) continue;
      // The rare paths (a lapsed reservation, an error) name the key by its string.
      const key = keys.key(i);
      let ok = usedPage < 0 && reservation === undefined && rank.isLapsed(key, page);
      if (ok) {
        lapsedPageOfKey ??= new Map();
        ok = (lapsedPageOfKey.get(key) ?? page) === page;
        lapsedPageOfKey.set(key, page);
      }
      if (!ok) {
        throw new MetadataError(
          Reason.RESERVATION_NOT_FOUND,
          `key "${key}" has no reservation of page ${page} on rank ${subject.rank} of namespace "${subject.namespace}" (never reserved, expired and reused, or reserved for another key)`,
          { ...subject, key, page },
        );
      }
    }
    if (pagesToRelease.length === 0) return records;
    const confirming = new Set(pages);
    for (const page of pagesToRelease) {
      if (rank.pageState(page) === "used" || confirming.has(page)) {
        throw new MetadataError(Reason.PAGE_IN_USE, `page ${page} of rank ${subject.rank} holds a confirmed key and cannot be released`, {
          ...subject,
          page,
          key: ownerKey(ns, rank, page),
          field: "pages_to_release",
        });
      }
    }
    return records;
  }

  /** markComplete files a record, not in the incomplete list, as complete and most recently used. */
  private markComplete(ns: Namespace, record: KeyRecord): void {
    record.complete = true;
    ns.lru.add(record);
  }

  /**
   * batchExists tells, per key, whether it is complete in the namespace, or
   * with a rank, whether it is confirmed on that rank.
   */
  batchExists(namespace: string, keyBatch: Keys, rankNo?: number): boolean[] {
    const name = namespaceName(namespace, this.options);
    const keys = keyListFor(keyBatch, "keys", this.options);
    if (rankNo !== undefined) checkUint32(rankNo, "rank");
    this.expire();
    const ns = this.namespaces.get(name);
    const exists = new Array<boolean>(keys.length).fill(false);
    if (ns === undefined) return exists;
    if (rankNo !== undefined) {
      const rank = ns.ranks.get(rankNo);
      if (rank === undefined) return exists;
      const records = ns.findAll(keys);
      for (let i = 0; i < keys.length; i++) exists[i] = confirmedPage(records[i], rank.slot) >= 0;
      return exists;
    }
    const records = ns.findAll(keys);
    for (let i = 0; i < keys.length; i++) exists[i] = records[i]?.complete === true;
    return exists;
  }

  /**
   * getLocations returns each key's page on a rank (-1 where not found) and
   * gives each found key a read lease.
   */
  getLocations(namespace: string, rankNo: number, keyBatch: Keys, includeIncomplete = false): number[] {
    const name = namespaceName(namespace, this.options);
    const keys = keyListFor(keyBatch, "keys", this.options);
    this.expire();
    const { ns, rank } = this.rankOf(name, rankNo);
    const leaseUntilMs = this.clock() + this.options.readLeaseTtlMs;
    const pages = new Array<number>(keys.length);
    const records = ns.findAll(keys);
    for (let i = 0; i < keys.length; i++) {
      const record = records[i];
      const page = record !== undefined && (record.complete || includeIncomplete) ? confirmedPage(record, rank.slot) : -1;
      if (page < 0) {
        pages[i] = -1;
        continue;
      }
      pages[i] = page;
      if (record!.leaseUntilMs < leaseUntilMs) record!.leaseUntilMs = leaseUntilMs;
      ns.touch(record!);
    }
    return pages;
  }

  /** deleteKeys drops keys at once; pages of read-leased keys stay held until the lease ends. */
  deleteKeys(namespace: string, keyBatch: Keys): number {
    const name = namespaceName(namespace, this.options);
    const keys = keyListFor(keyBatch, "keys", this.options);
    this.expire();
    const ns = this.namespaces.get(name);
    if (ns === undefined) return 0;
    let deleted = 0;
    // A key repeated in the call finds its record already dropped: no pages left.
    for (const record of ns.findAll(keys)) {
      if (record === undefined || record.pages.length === 0) continue;
      this.dropKey(ns, record);
      deleted++;
    }
    return deleted;
  }

  /** clear drops every key and reservation of a namespace, or of all namespaces when namespace is undefined. */
  clear(namespace: string | undefined): void {
    const name = namespace === undefined ? undefined : namespaceName(namespace, this.options);
    this.expire();
    for (const ns of this.namespaces.values()) {
      if (name !== undefined && ns.name !== name) continue;
      for (const rank of ns.ranks.values()) {
        for (const reservation of rank.reservations) {
          rank.releaseReservation(reservation);
          this.record({ kind: "unreserve", namespace: ns.name, rank: rank.rank, page: reservation.page });
        }
        rank.lapsed.clear();
      }
      for (const record of ns.keys.values()) {
        if (record.pages.length > 0) this.dropKey(ns, record);
        else ns.forgetIfEmpty(record);
      }
    }
  }

  /** stats counts pages and keys of a namespace, or of all namespaces when namespace is undefined. */
  stats(namespace: string | undefined): NamespaceStatsView[] {
    const name = namespace === undefined ? undefined : namespaceName(namespace, this.options);
    this.expire();
    const views: NamespaceStatsView[] = [];
    for (const ns of this.namespaces.values()) {
      if (name !== undefined && ns.name !== name) continue;
      const ranks = [...ns.ranks.values()]
        .sort((a, b) => a.rank - b.rank)
        .map((rank) => ({
          rank: rank.rank,
          numPages: rank.numPages,
          freePages: rank.pool.freePages,
          reservedPages: rank.reservedPages,
          usedPages: rank.usedPages,
        }));
      views.push({
        namespace: ns.name,
        worldSize: ns.worldSize,
        ranks,
        ...ns.counts(),
      });
    }
    return views.sort((a, b) => (a.namespace < b.namespace ? -1 : 1));
  }

  /** expire processes every deadline that is due: expired reservations, stale incomplete keys, ended drains. */
  expire(): void {
    const now = this.clock();
    if (now < this.deadlines.nextMs) return;
    for (let due = this.deadlines.popDue(now); due !== undefined; due = this.deadlines.popDue(now)) {
      const ns = due.ns;
      if (due.kind === "reservations") {
        const expired = due.rank.expireReservations(now);
        if (expired !== undefined) {
          ns.events.expiredReservations += expired.length;
          for (const { page, record } of expired) {
            due.rank.lapse(page, ns.keyOf(record));
            ns.forgetIfEmpty(record);
            this.record({ kind: "unreserve", namespace: ns.name, rank: due.rank.rank, page });
          }
        }
        this.deadlines.armReservations(ns, due.rank);
      } else if (due.kind === "incomplete") {
        this.reclaimIncomplete(ns, now);
        this.deadlines.armIncomplete(ns);
      } else if (due.rank.endDrain(due.page, due.atMs)) {
        this.record({ kind: "undrain", namespace: ns.name, rank: due.rank.rank, page: due.page });
      }
    }
  }

  /**
   * reclaimIncomplete drops the keys of ns that stayed incomplete past their
   * deadline. A read-leased one waits for its lease: it goes to the back
   * with the lease's end as its deadline (later than it needs, never early).
   */
  private reclaimIncomplete(ns: Namespace, now: number): void {
    for (const record of ns.incomplete) {
      if (record.reclaimAtMs > now) return;
      if (record.leaseUntilMs > now) {
        record.reclaimAtMs = record.leaseUntilMs;
        ns.incomplete.moveToBack(record);
        continue;
      }
      this.dropKey(ns, record);
      ns.events.reclaimedIncompleteKeys++;
    }
  }

  /**
   * evictFor drops least recently used complete keys that hold a page of
   * `rank`, have no read lease and are not in the current batch, until `rank` has a free page. False when
   * nothing evictable is left.
   */
  private evictFor(ns: Namespace, rank: Rank, batch: Set<KeyRecord>, now: number): boolean {
    for (const record of ns.lru) {
      if (record.leaseUntilMs > now || batch.has(record) || confirmedPage(record, rank.slot) < 0) continue;
      this.dropKey(ns, record, now);
      ns.events.evictions++;
      if (rank.pool.freePages > 0) return true;
    }
    return false;
  }

  /**
   * dropKey takes a key's confirmed pages away and frees them, or drains them
   * while it is read-leased. The key stays in the registry while it has
   * reservations on other ranks.
   */
  private dropKey(ns: Namespace, record: KeyRecord, now = this.clock()): void {
    const untilMs = record.leaseUntilMs;
    const pages = record.pages;
    const drains = untilMs > now && pages.length > 0;
    // The key is named only for whoever needs it: the journal, or the drain that outlives the registry entry.
    const key = this.journal || drains ? ns.keyOf(record) : "";
    ns.lru.delete(record);
    ns.incomplete.delete(record);
    this.record({ kind: "forget", namespace: ns.name, key });
    if (drains) ns.nameDraining(record, key);
    for (let i = 0; i < pages.length; i += 2) {
      const rank = ns.slots[pages[i]!]!;
      const page = pages[i + 1]!;
      rank.dropConfirmed(page, untilMs, now);
      if (untilMs <= now) continue;
      this.deadlines.drain(ns, rank, page, untilMs);
      this.record({ kind: "drain", namespace: ns.name, rank: rank.rank, page, key, untilMs });
    }
    if (pages.length > 0) ns.confirmedKeys--;
    record.pages = NO_PAGES;
    record.complete = false;
    record.leaseUntilMs = 0;
    ns.forgetIfEmpty(record);
  }

  /** recordKey journals a key's confirmed pages (by rank number) and completeness. */
  private recordKey(ns: Namespace, record: KeyRecord): void {
    if (!this.journal) return;
    const pages = record.pages.slice();
    for (let i = 0; i < pages.length; i += 2) pages[i] = ns.slots[pages[i]!]!.rank;
    this.changes.push({ kind: "key", namespace: ns.name, key: ns.keyOf(record), complete: record.complete, pages });
  }

  /**
   * restore rebuilds an empty MetadataState from stored state, without
   * journaling it, and grants the restart terms (restartTerms). `stored`
   * yields all "rank" changes first, then "key", "reserve" and "drain"
   * changes in any order.
   */
  restore(stored: Iterable<Change>): void {
    const restoring = this.restoring();
    for (const change of stored) restoring.add(change);
    restoring.finish();
  }

  /**
   * restoring is restore a change at a time, for a caller that must yield
   * to its event loop between batches (a cluster member keeping its lease
   * alive): `add` each stored change in restore's order, then `finish`.
   */
  restoring(): { add(change: Change): void; finish(): void } {
    const terms = this.restartTerms();
    return {
      add: (change) => this.restoreOne(change, terms),
      finish: () => {
        for (const ns of this.namespaces.values()) {
          for (const rank of ns.ranks.values()) {
            rank.sortReservations();
            this.deadlines.armReservations(ns, rank);
          }
          this.deadlines.armIncomplete(ns);
        }
      },
    };
  }

  /**
   * replaying keeps this state equal to what restoring the store would
   * give, one stored change at a time, as a hot standby of a cluster applies
   * the leader's log (`apply`: a key record replaces the key's confirmed
   * pages whole, as the store replaces it). It neither journals nor runs
   * deadlines, and must not serve meanwhile. `takeOver` then readies it to
   * serve as a restart would: the restart terms (restartTerms), then the
   * deadlines.
   */
  replaying(): Replay {
    return { apply: (change) => this.replayOne(change), takeOver: () => this.takeOver() };
  }

  /** replayOne applies one change of the leader's journal (replaying); the restart terms come at takeOver. */
  private replayOne(change: Change): void {
    switch (change.kind) {
      case "rank":
        if (!this.namespaces.get(change.namespace)?.ranks.has(change.rank)) this.restoreOne(change, undefined);
        return;
      case "reserve": {
        const { ns, rank } = this.rankOf(change.namespace, change.rank);
        const held = rank.reservationOf(change.page);
        // A renewal comes as the same reservation again.
        if (held !== undefined && held.record === ns.recordOf(change.key)) rank.renew(held, change.expiresAtMs);
        else this.restoreOne(change, undefined);
        return;
      }
      case "unreserve": {
        const { ns, rank } = this.rankOf(change.namespace, change.rank);
        const reservation = rank.reservationOf(change.page);
        if (reservation === undefined) return;
        rank.releaseReservation(reservation);
        ns.forgetIfEmpty(reservation.record);
        return;
      }
      case "key":
      case "forget": {
        const ns = this.namespaces.get(change.namespace);
        if (ns === undefined) throw new Error(`replayed key "${change.key}" of unknown namespace "${change.namespace}"`);
        const record = ns.recordOf(change.key);
        this.unconfirm(ns, record);
        if (change.kind === "key") this.restoreOne(change, undefined);
        else ns.forgetIfEmpty(record);
        return;
      }
      case "drain":
        this.restoreOne(change, undefined);
        return;
      case "undrain": {
        const { rank } = this.rankOf(change.namespace, change.rank);
        const untilMs = rank.draining.get(change.page);
        if (untilMs !== undefined) rank.endDrain(change.page, untilMs);
        return;
      }
    }
  }

  /** unconfirm takes a record's confirmed pages away and frees them: a replayed key record replaces them, or the key is forgotten. */
  private unconfirm(ns: Namespace, record: KeyRecord): void {
    const pages = record.pages;
    if (pages.length === 0) return;
    for (let i = 0; i < pages.length; i += 2) ns.slots[pages[i]!]!.pool.release(pages[i + 1]!);
    ns.lru.delete(record);
    ns.incomplete.delete(record);
    ns.confirmedKeys--;
    record.pages = NO_PAGES;
    record.complete = false;
  }

  /** takeOver readies a replayed state to serve (replaying): the restart terms, then the deadlines. */
  private takeOver(): void {
    const terms = this.restartTerms();
    for (const ns of this.namespaces.values()) {
      for (const record of ns.keys.values()) if (record.pages.length > 0) grantRestartTerms(record, terms);
      for (const rank of ns.ranks.values()) {
        for (const [page, untilMs] of rank.draining) {
          const held = drainedUntil(untilMs, terms);
          if (held === untilMs) continue;
          rank.draining.set(page, held);
          this.deadlines.drain(ns, rank, page, held);
        }
        rank.sortReservations();
        this.deadlines.armReservations(ns, rank);
      }
      this.deadlines.armIncomplete(ns);
    }
  }

  /**
   * restartTerms: read leases are not stored, so a state that starts to
   * serve after a restart or a takeover grants every key with pages a read
   * lease of readLeaseTtlMs, for one TTL no key is evicted and no deleted
   * key's page is freed (draining pages are held at least as long), and
   * every incomplete key a fresh incomplete TTL.
   */
  private restartTerms(): RestartTerms {
    const now = this.clock();
    return { leaseUntilMs: now + this.options.readLeaseTtlMs, reclaimAtMs: now + this.options.incompleteTtlMs };
  }

  /** restoreOne applies one stored change; with the restore's terms (restartTerms), or without them when the takeover grants them later (replaying). */
  private restoreOne(change: Change, terms: RestartTerms | undefined): void {
    switch (change.kind) {
      case "rank": {
        let ns = this.namespaces.get(change.namespace);
        if (ns === undefined) {
          ns = new Namespace(change.namespace, change.worldSize);
          this.namespaces.set(change.namespace, ns);
        }
        ns.addRank(change.rank, change.numPages);
        break;
      }
      case "key": {
        const ns = this.namespaces.get(change.namespace);
        if (ns === undefined) throw new Error(`stored key "${change.key}" of unknown namespace "${change.namespace}"`);
        const record = ns.recordOf(change.key);
        // Ranks become slots in a copy of exactly the stored size (growing by push would reserve more).
        const pages = change.pages.slice();
        for (let i = 0; i < pages.length; i += 2) {
          const rank = this.rankOf(change.namespace, pages[i]!).rank;
          rank.restoreUsed(record, pages[i + 1]!);
          pages[i] = rank.slot;
        }
        record.pages = pages.length > 0 ? pages : NO_PAGES;
        ns.confirmedKeys++;
        if (change.complete) this.markComplete(ns, record);
        else ns.incomplete.add(record);
        if (terms !== undefined) grantRestartTerms(record, terms);
        break;
      }
      case "reserve": {
        const { ns, rank } = this.rankOf(change.namespace, change.rank);
        rank.restoreReservation(ns.recordOf(change.key), change.page, change.expiresAtMs);
        break;
      }
      case "drain": {
        const { ns, rank } = this.rankOf(change.namespace, change.rank);
        const untilMs = terms === undefined ? change.untilMs : drainedUntil(change.untilMs, terms);
        // The page's holder is the deleted key, not whatever record has its name now.
        const holder = newKeyRecord();
        ns.nameDraining(holder, change.key);
        rank.restoreDraining(holder, change.page, untilMs);
        this.deadlines.drain(ns, rank, change.page, untilMs);
        break;
      }
      case "unreserve":
      case "undrain":
      case "forget":
        break;
    }
  }

  /** checkRank throws RANK_NOT_INITIALIZED unless the rank is initialized (for APIs that name a rank on every call). */
  checkRank(namespace: string, rankNo: number): void {
    this.rankOf(namespaceName(namespace, this.options), rankNo);
  }

  /** rankOf finds an initialized rank or throws RANK_NOT_INITIALIZED. */
  private rankOf(name: string, rankNo: number): { ns: Namespace; rank: Rank } {
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

  private recordReserve(ns: Namespace, rank: Rank, reservation: Reservation): void {
    if (!this.journal) return;
    this.record({
      kind: "reserve",
      namespace: ns.name,
      rank: rank.rank,
      page: reservation.page,
      key: ns.keyOf(reservation.record),
      expiresAtMs: reservation.expiresAtMs,
    });
  }

  private record(change: Change): void {
    if (this.journal) this.changes.push(change);
  }
}

/** ownerKey names the key holding a page, undefined when it is free. */
function ownerKey(ns: Namespace, rank: Rank, page: number): string | undefined {
  const owner = rank.pool.ownerOf(page);
  return owner === undefined ? undefined : ns.keyOf(owner);
}

/** grantRestartTerms gives a key with pages its read lease and, if it is incomplete, its reclaim deadline after a restart (restartTerms). */
function grantRestartTerms(record: KeyRecord, terms: RestartTerms): void {
  record.leaseUntilMs = terms.leaseUntilMs;
  // A complete key is never reclaimed: it keeps no deadline (a number that would cost a heap box per key).
  if (!record.complete) record.reclaimAtMs = terms.reclaimAtMs;
}

/** drainedUntil is how long a stored draining page is held after a restart: at least the restart's read lease (restartTerms). */
function drainedUntil(untilMs: number, terms: RestartTerms): number {
  return Math.max(untilMs, terms.leaseUntilMs);
}
