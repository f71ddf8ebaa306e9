import { AllocationStatus, Role } from "../../gen/hf3fs/metadata/v1/metadata_pb.js";
import type { Change, ParentName } from "./change.js";
import type { Clock } from "./clock.js";
import { Deadlines } from "./deadlines.js";
import { invalidArgument, limitExceeded, MetadataError, Reason } from "./errors.js";
import type { KeyList, Keys } from "./key-list.js";
import { ORPHANED } from "./key-tree.js";
import { Namespace } from "./namespace.js";
import type { NamespaceCounts } from "./namespace-counters.js";
import type { Rank } from "./rank.js";
import { defaultStateOptions, MAX_NUM_PAGES, type StateOptions } from "./state-options.js";
import { checkCount, checkMaxRanks, checkPages, checkPrefixes, checkSameLength, checkUint32, checkWatermarks, keyListFor, namespaceName } from "./validate.js";

export { AllocationStatus, Role };

const NO_CHANGES: readonly Change[] = Object.freeze([]);
/** NO_BATCH is the batch of an eviction that no call waits for (evictAhead). */
const NO_BATCH: ReadonlySet<number> = new Set();

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
  nowMs: number;
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
  /** crowded are the ranks past the high watermark that evictAhead has not brought down yet, with their namespaces. */
  private readonly crowded = new Map<Rank, Namespace>();
  private changes: Change[] = [];
  /** applying is true while a replayed change is applied (replaying), which journals nothing. */
  private applying = false;

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
    checkMaxRanks(this.options.maxRanksPerNamespace);
    checkWatermarks(this.options.evictHighWatermark, this.options.evictLowWatermark);
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
      return { created: false, numPages, freePages: existing.freePages };
    }
    if (ns === undefined && this.namespaces.size >= this.options.maxNamespaces) {
      throw limitExceeded("namespace", `the server has ${this.namespaces.size} namespaces, the limit (--max-namespaces)`, { namespace: name, rank: rankNo });
    }
    if (ns !== undefined && ns.ranks.size >= this.options.maxRanksPerNamespace) {
      throw limitExceeded("rank", `namespace "${name}" has ${ns.ranks.size} ranks, the limit (--max-ranks-per-namespace)`, { namespace: name, rank: rankNo });
    }
    if (ns === undefined) {
      ns = this.newNamespace(name, worldSize);
    }
    ns.addRank(rankNo, numPages);
    this.record({ kind: "rank", namespace: name, rank: rankNo, numPages, worldSize });
    return { created: true, numPages, freePages: numPages };
  }

  /**
   * dropRank removes a rank (an admin's call): its reservations and lapses
   * end, its draining pages go, every key loses its page there (a key left
   * with no page is forgotten), and a namespace left without ranks goes
   * too, its world_size with it. With world_size 0 the rank no longer
   * counts for completeness: an incomplete key confirmed on every rank left
   * becomes complete. A complete key stays complete, as it does when a rank
   * is added. Returns how many keys were forgotten.
   */
  dropRank(namespace: string, rankNo: number): number {
    const name = namespaceName(namespace, this.options);
    checkUint32(rankNo, "rank");
    this.expire();
    const { ns, rank } = this.rankOf(name, rankNo);
    const subject = { namespace: name, rank: rankNo };
    for (const page of [...rank.reservations]) {
      ns.forgetIfEmpty(rank.releaseReservation(page));
      this.record({ kind: "unreserve", ...subject, page });
    }
    rank.forgetLapses();
    for (const [page, drain] of [...rank.draining]) {
      rank.endDrain(page, drain.untilMs);
      this.record({ kind: "undrain", ...subject, page });
    }
    const now = this.clock();
    let forgotten = 0;
    for (const entry of [...ns.keys.live()]) {
      const page = rank.confirmedPage(entry);
      if (page < 0) continue;
      if (ns.columns.confirmed[entry] === 1) {
        this.dropKey(ns, entry, now, false); // its one page goes with the rank: nothing is left to drain
        forgotten++;
        continue;
      }
      rank.dropConfirmed(entry, page, undefined);
      this.recordKey(ns, entry);
    }
    ns.removeRank(rankNo);
    this.crowded.delete(rank);
    this.record({ kind: "unrank", ...subject });
    for (const entry of [...ns.incomplete]) {
      if (ns.columns.confirmed[entry]! < ns.requiredRanks) continue;
      ns.incomplete.delete(entry);
      ns.complete(entry, now);
      this.recordKey(ns, entry);
    }
    if (ns.ranks.size === 0) this.namespaces.delete(name);
    else this.deadlines.armIncomplete(ns);
    return forgotten;
  }

  /**
   * batchAllocate gives each key a page on a rank: its confirmed page
   * (EXISTING), its active reservation renewed (RESERVED), a free page newly
   * reserved (NEW), evicting complete keys when none is free (evictOne), or
   * none (NO_SPACE). A key it registers takes prefixKeys[i] as its parent
   * (attachParent). A rank it leaves past the high watermark is crowded
   * (evictAhead).
   */
  batchAllocate(namespace: string, rankNo: number, keyBatch: Keys, prefixKeys: Keys = []): AllocateResult {
    const name = namespaceName(namespace, this.options);
    const keys = keyListFor(keyBatch, "keys", this.options);
    const prefixes = prefixKeys.length > 0 ? checkPrefixes(keys, prefixKeys, this.options) : undefined;
    this.expire();
    const { ns, rank } = this.rankOf(name, rankNo);
    const now = this.clock();
    const expiresAtMs = now + this.options.reservationTtlMs;
    const pages = new Array<number>(keys.length);
    const statuses = new Array<AllocationStatus>(keys.length);
    // The keys of this batch and their parents, built on the first eviction: none of them may be evicted for another.
    // (A key repeated in the batch finds the reservation its first position made: same page, RESERVED.)
    let batch: Set<number> | undefined;
    const found = ns.findAll(keys);
    // placed[i] is key i's entry once it holds a page here, for the next key's parent (attachParent).
    const placed = prefixes === undefined ? undefined : new Int32Array(keys.length).fill(-1);
    for (let i = 0; i < keys.length; i++) {
      const entry = found[i]! >= 0 ? found[i]! : ns.entryAt(keys, i);
      const held = rank.pageOf(entry);
      if (placed !== undefined) placed[i] = entry;
      if (held >= 0 && rank.isUsed(held)) {
        ns.touch(entry, now);
        pages[i] = held;
        statuses[i] = AllocationStatus.EXISTING;
        continue;
      }
      if (held >= 0) {
        if (rank.expiresAtMs(held) !== expiresAtMs) {
          rank.renew(held, expiresAtMs);
          this.recordReserve(ns, rank, entry, held);
        }
        pages[i] = held;
        statuses[i] = AllocationStatus.RESERVED;
        continue;
      }
      // A key that holds nothing yet is new to the registry: it takes its parent below.
      const fresh = ns.columns.holdsNothing(entry);
      let page = rank.reserveFree(entry, expiresAtMs);
      if (page < 0) {
        // (The batch's new keys hold reservations, which eviction never takes.)
        batch ??= this.protectedFrom(ns, keys, found, prefixes);
        if (this.evictOne(ns, rank, batch, now)) {
          ns.events.inlineEvictions++;
          page = rank.reserveFree(entry, expiresAtMs);
        }
      }
      if (page < 0) {
        ns.forgetIfEmpty(entry);
        if (placed !== undefined) placed[i] = -1;
        pages[i] = -1;
        statuses[i] = AllocationStatus.NO_SPACE;
        continue;
      }
      if (fresh && prefixes !== undefined) this.attachParent(ns, entry, keys, prefixes, i, placed!);
      this.recordReserve(ns, rank, entry, page);
      pages[i] = page;
      statuses[i] = AllocationStatus.NEW;
    }
    this.deadlines.armReservations(ns, rank);
    this.noteCrowding(ns, rank);
    return { pages, statuses };
  }

  /**
   * protectedFrom is what an eviction for a batch may not take: the
   * batch's registered keys and their parents. A parent that is the key
   * before it in the batch is one of those already.
   */
  private protectedFrom(ns: Namespace, keys: KeyList, found: Int32Array, prefixes: KeyList | undefined): Set<number> {
    const kept = new Set<number>();
    for (const entry of found) if (entry >= 0) kept.add(entry);
    for (let i = 0; prefixes !== undefined && i < keys.length; i++) {
      if (prefixes.byteLength(i) === 0 || (i > 0 && prefixes.equals(i, keys, i - 1))) continue;
      const parent = ns.findAt(prefixes, i);
      if (parent >= 0) kept.add(parent);
    }
    return kept;
  }

  /**
   * attachParent gives the key at position i, just registered, its parent:
   * the key before it in the batch when that is its prefix (a chain, the
   * usual case: no lookup), else the registered key its prefix names. A
   * key whose prefix is empty is a root; one whose prefix is not registered
   * is an orphan (no prefix match reaches it).
   */
  private attachParent(ns: Namespace, entry: number, keys: KeyList, prefixes: KeyList, i: number, placed: Int32Array): void {
    if (prefixes.byteLength(i) === 0) return;
    let parent = i > 0 && placed[i - 1]! >= 0 && prefixes.equals(i, keys, i - 1) ? placed[i - 1]! : -1;
    if (parent < 0) parent = ns.findAt(prefixes, i);
    if (parent < 0) ns.orphan(entry);
    else ns.adopt(entry, parent);
  }

  /**
   * confirmWrite makes each (keys[i], pages[i]) USED and frees each page of
   * pagesToRelease that is still RESERVED for keysToRelease[i]. A release
   * frees only its own key's reservation: one that names no key, or a page
   * reserved for another key (its reservation lapsed and the page was
   * reserved again), changes nothing, and the reservation lapses after its
   * TTL. The whole batch is checked first; on any error nothing changes.
   */
  confirmWrite(
    namespace: string,
    rankNo: number,
    keyBatch: Keys,
    pages: readonly number[],
    pagesToRelease: readonly number[] = [],
    keysToRelease: Keys = [],
  ): ConfirmResult {
    const name = namespaceName(namespace, this.options);
    const keys = keyListFor(keyBatch, "keys", this.options);
    checkSameLength(keys, "keys", pages, "pages");
    checkCount(pagesToRelease, "pages_to_release", this.options);
    const releasing = keysToRelease.length > 0 ? keyListFor(keysToRelease, "keys_to_release", this.options) : undefined;
    if (releasing !== undefined) checkSameLength(releasing, "keys_to_release", pagesToRelease, "pages_to_release");
    this.expire();
    const { ns, rank } = this.rankOf(name, rankNo);
    const subject = { namespace: name, rank: rankNo };
    checkPages(pages, "pages", rank.numPages, subject);
    checkPages(pagesToRelease, "pages_to_release", rank.numPages, subject);
    const found = this.checkConfirmable(ns, rank, keys, pages, pagesToRelease, subject);

    const now = this.clock();
    const columns = ns.columns;
    const result: ConfirmResult = { confirmed: 0, released: 0, completed: [] };
    for (let i = 0; i < keys.length; i++) {
      const page = pages[i]!;
      // A key repeated in the batch, or confirmed through a lapse, may have got its entry at an earlier position.
      const entry = found[i]! >= 0 ? found[i]! : ns.entryAt(keys, i);
      if (rank.confirmedPage(entry) === page) continue;
      const firstPage = columns.confirmed[entry] === 0;
      if (rank.confirm(entry, page) && this.journal) this.record({ kind: "unreserve", namespace: name, rank: rankNo, page, confirmed: true });
      result.confirmed++;
      if (firstPage) {
        ns.confirmedKeys++;
        columns.reclaimAtMs[entry] = now + this.options.incompleteTtlMs;
      }
      if (!ns.isComplete(entry) && columns.confirmed[entry]! >= ns.requiredRanks) {
        if (!firstPage) ns.incomplete.delete(entry);
        ns.complete(entry, now);
        result.completed.push(i);
      } else if (firstPage) {
        ns.incomplete.add(entry);
      }
      this.recordKey(ns, entry);
    }
    this.deadlines.armIncomplete(ns);
    const releasers = releasing === undefined ? undefined : ns.findAll(releasing);
    for (let i = 0; releasers !== undefined && i < pagesToRelease.length; i++) {
      const page = pagesToRelease[i]!;
      const holder = rank.reservedBy(page);
      if (holder < 0 || holder !== releasers[i]) continue;
      ns.forgetIfEmpty(rank.releaseReservation(page));
      this.record({ kind: "unreserve", namespace: name, rank: rankNo, page });
      result.released++;
    }
    // Reserved pages cannot be evicted, confirmed ones can: a rank crowded by this call's reservations is worth a look now.
    this.noteCrowding(ns, rank);
    return result;
  }

  /**
   * checkConfirmable throws unless every confirmation and release of a batch
   * can be applied, and returns each position's key entry as it was (so the
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
  ): Int32Array {
    let lapsedPageOfKey: Map<string, number> | undefined;
    const found = ns.findAll(keys);
    for (let i = 0; i < keys.length; i++) {
      const page = pages[i]!;
      const held = found[i]! >= 0 ? rank.pageOf(found[i]!) : -1;
      if (held === page) continue;
      // The rare paths (a lapsed reservation, an error) name the key by its string.
      const key = keys.key(i);
      let ok = held < 0 && rank.isLapsed(key, page);
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
    if (pagesToRelease.length === 0) return found;
    const confirming = new Set(pages);
    for (const page of pagesToRelease) {
      if (rank.pageState(page) === "used" || confirming.has(page)) {
        throw new MetadataError(Reason.PAGE_IN_USE, `page ${page} of rank ${subject.rank} holds a confirmed key and cannot be released`, {
          ...subject,
          page,
          key: rank.holderKey(page, (entry) => ns.keyOf(entry)),
          field: "pages_to_release",
        });
      }
    }
    return found;
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
      const found = ns.findAll(keys);
      for (let i = 0; i < keys.length; i++) exists[i] = found[i]! >= 0 && rank.confirmedPage(found[i]!) >= 0;
      return exists;
    }
    const found = ns.findAll(keys);
    for (let i = 0; i < keys.length; i++) exists[i] = found[i]! >= 0 && ns.isComplete(found[i]!);
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
    const now = this.clock();
    const leaseUntilMs = now + this.options.readLeaseTtlMs;
    const pages = new Array<number>(keys.length);
    const found = ns.findAll(keys);
    for (let i = 0; i < keys.length; i++) {
      const entry = found[i]!;
      const page = entry >= 0 && (includeIncomplete || ns.isComplete(entry)) ? rank.confirmedPage(entry) : -1;
      pages[i] = page;
      if (page < 0) continue;
      ns.lease(entry, leaseUntilMs, now); // first: a leased key's touch moves it in no list
      ns.touch(entry, now);
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
    // A key repeated in the call finds its entry already dropped: no pages left.
    for (const entry of ns.findAll(keys)) {
      if (entry < 0 || ns.columns.confirmed[entry] === 0) continue;
      this.dropKey(ns, entry);
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
        for (const page of rank.reservations) {
          rank.releaseReservation(page);
          this.record({ kind: "unreserve", namespace: ns.name, rank: rank.rank, page });
        }
        rank.forgetLapses();
      }
      for (const entry of ns.keys.live()) {
        if (ns.columns.confirmed[entry]! > 0) this.dropKey(ns, entry);
        else ns.forgetIfEmpty(entry);
      }
    }
  }

  /** stats counts pages and keys of a namespace, or of all namespaces when namespace is undefined. */
  stats(namespace: string | undefined): NamespaceStatsView[] {
    if (namespace === undefined) return this.statsPage("", Number.POSITIVE_INFINITY).views;
    const ns = this.namespaces.get(namespaceName(namespace, this.options));
    this.expire();
    return ns === undefined ? [] : [statsOf(ns)];
  }

  /**
   * statsPage reports at most `size` namespaces, by name, from the first
   * after `after` ("" for the first), and the name to ask for the next page
   * after ("" when none is left): an answer stays bounded however many
   * namespaces and ranks there are.
   */
  statsPage(after: string, size: number): { views: NamespaceStatsView[]; next: string } {
    this.expire();
    const names = [...this.namespaces.keys()].filter((name) => name > after).sort();
    const page = names.slice(0, size);
    const next = names.length > page.length ? page[page.length - 1]! : "";
    return { views: page.map((name) => statsOf(this.namespaces.get(name)!)), next };
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
        this.reclaimIncomplete(ns, now);
        this.deadlines.armIncomplete(ns);
      } else if (due.rank.endDrain(due.page, due.atMs)) {
        this.record({ kind: "undrain", namespace: ns.name, rank: due.rank.rank, page: due.page });
      }
    }
  }

  /** expireReservations frees the rank's reservations expired by now, remembering each as lapsed for a late confirmation. */
  private expireReservations(ns: Namespace, rank: Rank, now: number): void {
    rank.expireReservations(now, (page, entry) => {
      rank.lapse(page, ns.keyOf(entry));
      ns.forgetIfEmpty(entry);
      ns.events.expiredReservations++;
      this.record({ kind: "unreserve", namespace: ns.name, rank: rank.rank, page });
    });
  }

  /**
   * reclaimIncomplete drops the keys of ns that stayed incomplete past their
   * deadline. A read-leased one waits for its lease: it goes to the back
   * with the lease's end as its deadline (later than it needs, never early).
   */
  private reclaimIncomplete(ns: Namespace, now: number): void {
    const columns = ns.columns;
    for (const entry of ns.incomplete) {
      if (columns.reclaimAtMs[entry]! > now) return;
      if (columns.leaseUntilMs[entry]! > now) {
        columns.reclaimAtMs[entry] = columns.leaseUntilMs[entry]!;
        ns.incomplete.moveToBack(entry);
        continue;
      }
      this.dropKey(ns, entry);
      ns.events.reclaimedIncompleteKeys++;
    }
  }

  /**
   * evictOne drops one complete key that holds a page of `rank`, has no read
   * lease (leased keys are in no list it reads) and is not in `batch`: the least recently used of the orphans,
   * else of the reachable leaves, else of the rest (with children: the LRU
   * fallback, or every complete key under plain LRU). False when none is
   * evictable. Each list is read from its oldest key, skipping the ones
   * that may not go.
   */
  private evictOne(ns: Namespace, rank: Rank, batch: ReadonlySet<number>, now: number): boolean {
    ns.returnLeases(now);
    for (const { list, cause } of ns.evictionOrder) {
      for (let entry = list.first; entry >= 0; entry = list.after(entry)) {
        if (batch.has(entry) || rank.confirmedPage(entry) < 0) continue;
        this.dropKey(ns, entry, now);
        ns.events.evictions++;
        ns.events[cause]++;
        return true;
      }
    }
    return false;
  }

  /** noteCrowding marks a rank crowded when more than the high watermark of its pages are held (evictAhead), after a BatchAllocate or ConfirmWrite on it; never one whose low watermark is no page. */
  private noteCrowding(ns: Namespace, rank: Rank): void {
    // A rank so small that the low watermark holds no page (1 page at 0.90) is never evicted ahead: that would empty it.
    if (heldPagesAt(rank, this.options.evictLowWatermark) === 0) return;
    if (rank.numPages - rank.freePages > heldPagesAt(rank, this.options.evictHighWatermark)) this.crowded.set(rank, ns);
  }

  /** evictionPending tells whether a rank is crowded: evictAhead has work. */
  get evictionPending(): boolean {
    return this.crowded.size > 0;
  }

  /**
   * evictAhead evicts (evictOne) from the crowded ranks, at most maxKeys
   * keys, until each holds no more than the low watermark of its pages, so
   * that writers find free pages instead of evicting inline. A rank leaves
   * the crowded set once down, or once nothing on it is evictable (the
   * next BatchAllocate or ConfirmWrite that leaves it crowded marks it
   * again). Returns the number of keys evicted; the caller runs it in steps
   * between calls while evictionPending.
   */
  evictAhead(maxKeys: number): number {
    this.expire();
    const now = this.clock();
    let evicted = 0;
    for (const [rank, ns] of this.crowded) {
      const target = heldPagesAt(rank, this.options.evictLowWatermark);
      let stuck = false;
      while (rank.numPages - rank.freePages > target && evicted < maxKeys) {
        if (!this.evictOne(ns, rank, NO_BATCH, now)) {
          stuck = true;
          break;
        }
        evicted++;
      }
      if (stuck || rank.numPages - rank.freePages <= target) this.crowded.delete(rank);
      if (evicted >= maxKeys) break;
    }
    return evicted;
  }

  /**
   * dropKey takes a key's confirmed pages away and frees them, or drains them
   * while it is read-leased (unless drainLeased is false: its pages go with
   * a dropped rank). The key stays in the registry while it has
   * reservations on other ranks.
   */
  private dropKey(ns: Namespace, entry: number, now = this.clock(), drainLeased = true): void {
    const columns = ns.columns;
    const untilMs = columns.leaseUntilMs[entry]!;
    const drains = drainLeased && untilMs > now && columns.confirmed[entry]! > 0;
    // The key is named only for whoever needs it: the journal, or the drain that outlives the registry entry.
    const key = this.journal || drains ? ns.keyOf(entry) : "";
    this.record({ kind: "forget", namespace: ns.name, key });
    this.unconfirm(ns, entry, drains ? untilMs : 0, key);
    columns.leaseUntilMs[entry] = 0;
    ns.forgetIfEmpty(entry);
  }

  /**
   * unconfirm takes a key's confirmed pages away, and the key off its list:
   * each page is freed, or, with drainUntilMs, held DRAINING for `key` until
   * then (scheduled and journaled). A dropped key's pages (dropKey), or a
   * replayed key record's that replaces them (replayOne).
   */
  private unconfirm(ns: Namespace, entry: number, drainUntilMs = 0, key = ""): void {
    if (ns.columns.confirmed[entry] === 0) return;
    ns.unlist(entry);
    ns.confirmedKeys--;
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
      this.record({ kind: "drain", namespace: ns.name, rank: rank.rank, page, key, untilMs: drainUntilMs });
    }
  }

  /** recordKey journals a key's confirmed pages (by rank number), completeness and parent. */
  private recordKey(ns: Namespace, entry: number): void {
    if (!this.journal) return;
    this.changes.push({
      kind: "key",
      namespace: ns.name,
      key: ns.keyOf(entry),
      parent: parentName(ns, entry),
      complete: ns.isComplete(entry),
      pages: ns.confirmedPages(entry),
    });
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
   * alive): `add` each stored change in restore's order, then `link` the
   * keys stored before their parents a batch at a time (true once done),
   * then `finish`.
   */
  restoring(): { add(change: Change): void; link(max: number): boolean; finish(): void } {
    const terms = this.restartTerms();
    const pending: PendingParents = { namespaces: [], entries: [], names: [] };
    let linked = 0;
    const link = (max: number) => {
      for (const end = Math.min(pending.entries.length, linked + max); linked < end; linked++) {
        const ns = pending.namespaces[linked]!;
        const entry = pending.entries[linked]!;
        if (ns.tree.settled(entry)) continue; // listed twice: linked already
        if (!ns.adoptByName(entry, pending.names[linked]!)) ns.orphan(entry);
      }
      return linked === pending.entries.length;
    };
    return {
      add: (change) => this.restoreOne(change, terms, pending),
      link,
      finish: () => {
        link(Number.POSITIVE_INFINITY);
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
    return {
      apply: (change) => {
        this.applying = true;
        try {
          this.replayOne(change);
        } finally {
          this.applying = false;
        }
      },
      takeOver: () => this.takeOver(),
    };
  }

  /** replayOne applies one change of the leader's journal (replaying); the restart terms come at takeOver. */
  private replayOne(change: Change): void {
    switch (change.kind) {
      case "rank":
        if (!this.namespaces.get(change.namespace)?.ranks.has(change.rank)) this.restoreOne(change, undefined);
        return;
      case "unrank": {
        // The changes before it emptied the rank, as they did the leader's.
        const ns = this.namespaces.get(change.namespace);
        ns?.removeRank(change.rank);
        if (ns?.ranks.size === 0) this.namespaces.delete(change.namespace);
        return;
      }
      case "reserve": {
        const { ns, rank } = this.rankOf(change.namespace, change.rank);
        const holder = rank.reservedBy(change.page);
        // A renewal comes as the same reservation again (the same expiry: its parent was journaled anew, recordOrphan).
        if (holder < 0 || holder !== ns.entryOf(change.key)) this.restoreOne(change, undefined);
        else if (rank.expiresAtMs(change.page) !== change.expiresAtMs) rank.renew(change.page, change.expiresAtMs);
        return;
      }
      case "unreserve": {
        const { ns, rank } = this.rankOf(change.namespace, change.rank);
        if (rank.reservedBy(change.page) < 0) return;
        const entry = rank.releaseReservation(change.page);
        // A confirmation's key record follows: forgetting the key in between would cut it from its children.
        if (!change.confirmed) ns.forgetIfEmpty(entry);
        return;
      }
      case "key":
      case "forget": {
        const ns = this.namespaces.get(change.namespace);
        if (ns === undefined) throw new Error(`replayed key "${change.key}" of unknown namespace "${change.namespace}"`);
        const entry = ns.entryOf(change.key);
        this.unconfirm(ns, entry);
        if (change.kind === "key") this.restoreOne(change, undefined);
        else ns.forgetIfEmpty(entry);
        return;
      }
      case "drain":
        this.restoreOne(change, undefined);
        return;
      case "undrain": {
        const { rank } = this.rankOf(change.namespace, change.rank);
        const drain = rank.draining.get(change.page);
        if (drain !== undefined) rank.endDrain(change.page, drain.untilMs);
        return;
      }
    }
  }

  /** takeOver readies a replayed state to serve (replaying): the restart terms, then the deadlines. */
  private takeOver(): void {
    const terms = this.restartTerms();
    for (const ns of this.namespaces.values()) {
      for (const entry of ns.keys.live()) if (ns.columns.confirmed[entry]! > 0) grantRestartTerms(ns, entry, terms);
      for (const rank of ns.ranks.values()) {
        for (const [page, drain] of rank.draining) {
          const held = drainedUntil(drain.untilMs, terms);
          if (held === drain.untilMs) continue;
          drain.untilMs = held;
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
    return { nowMs: now, leaseUntilMs: now + this.options.readLeaseTtlMs, reclaimAtMs: now + this.options.incompleteTtlMs };
  }

  /**
   * restoreOne applies one stored change; with the restore's terms
   * (restartTerms) and the parents it has yet to find, or without them when
   * the takeover grants them later (replaying: the leader's log registers a
   * parent before its children).
   */
  private restoreOne(change: Change, terms: RestartTerms | undefined, pending?: PendingParents): void {
    switch (change.kind) {
      case "rank": {
        let ns = this.namespaces.get(change.namespace);
        ns ??= this.newNamespace(change.namespace, change.worldSize);
        ns.addRank(change.rank, change.numPages);
        break;
      }
      case "key": {
        const ns = this.namespaces.get(change.namespace);
        if (ns === undefined) throw new Error(`stored key "${change.key}" of unknown namespace "${change.namespace}"`);
        const entry = ns.entryOf(change.key);
        restoreParent(ns, entry, change.parent, pending);
        const pages = change.pages;
        for (let i = 0; i < pages.length; i += 2) this.rankOf(change.namespace, pages[i]!).rank.restoreUsed(entry, pages[i + 1]!);
        ns.confirmedKeys++;
        if (change.complete) ns.complete(entry, this.clock());
        else ns.incomplete.add(entry);
        if (terms !== undefined) grantRestartTerms(ns, entry, terms);
        break;
      }
      case "reserve": {
        const { ns, rank } = this.rankOf(change.namespace, change.rank);
        const entry = ns.entryOf(change.key);
        restoreParent(ns, entry, change.parent, pending);
        rank.restoreReservation(entry, change.page, change.expiresAtMs);
        break;
      }
      case "drain": {
        const { ns, rank } = this.rankOf(change.namespace, change.rank);
        const untilMs = terms === undefined ? change.untilMs : drainedUntil(change.untilMs, terms);
        // The page's holder is the deleted key, not whatever entry has its name now.
        rank.restoreDraining(change.page, untilMs, change.key);
        this.deadlines.drain(ns, rank, change.page, untilMs);
        break;
      }
      case "unreserve":
      case "undrain":
      case "forget":
        break;
    }
  }

  /** newNamespace creates and registers a namespace under the eviction policy. */
  private newNamespace(name: string, worldSize: number): Namespace {
    const ns = new Namespace(name, worldSize, this.options.eviction === "prefix", (entry) => this.recordOrphan(ns, entry));
    this.namespaces.set(name, ns);
    return ns;
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

  /**
   * recordOrphan journals again the records of a key whose parent left the
   * registry, which name that parent: its key record and its reservations,
   * now naming none (null), so that a restart does not link it to a later
   * key of the parent's name. Not while replaying: the leader's log brings
   * those records.
   */
  private recordOrphan(ns: Namespace, entry: number): void {
    if (!this.journal || this.applying) return;
    if (ns.columns.confirmed[entry]! > 0) this.recordKey(ns, entry);
    for (let slot = 0, left = ns.columns.reserved[entry]!; left > 0; slot++) {
      const rank = ns.slots[slot]!;
      const page = rank.pageOf(entry);
      if (page < 0 || rank.reservedBy(page) !== entry) continue;
      this.recordReserve(ns, rank, entry, page);
      left--;
    }
  }

  /** recordReserve journals key e's reservation of page on rank, with its expiry. */
  private recordReserve(ns: Namespace, rank: Rank, entry: number, page: number): void {
    if (!this.journal) return;
    this.record({
      kind: "reserve",
      namespace: ns.name,
      rank: rank.rank,
      page,
      key: ns.keyOf(entry),
      parent: parentName(ns, entry),
      expiresAtMs: rank.expiresAtMs(page),
    });
  }

  private record(change: Change): void {
    if (this.journal) this.changes.push(change);
  }
}

/** PendingParents are the keys restored before their parents, with the parents' names, to link once all keys are in (restoring). */
interface PendingParents {
  namespaces: Namespace[];
  entries: number[];
  names: string[];
}

/**
 * restoreParent gives a restored key the parent its record names, unless
 * an earlier record of it did (a key's parent is set once: by its first
 * reservation, then only lost): a root, an orphan, or the named key, which
 * a restore may not have met yet (pending).
 */
function restoreParent(ns: Namespace, entry: number, parent: ParentName, pending: PendingParents | undefined): void {
  if (parent === "" || ns.tree.settled(entry)) return;
  if (parent !== null && ns.adoptByName(entry, parent)) return;
  if (parent !== null && pending !== undefined) {
    pending.namespaces.push(ns);
    pending.entries.push(entry);
    pending.names.push(parent);
  } else ns.orphan(entry);
}

/** heldPagesAt is the number of held pages of a rank at a watermark (a fraction of its pages). */
function heldPagesAt(rank: Rank, watermark: number): number {
  // The epsilon keeps 0.95 × 100 at 95 pages, whichever way the product rounds.
  return Math.floor(rank.numPages * watermark + 1e-9);
}

/** parentName names key e's parent for the journal (ParentName). */
function parentName(ns: Namespace, entry: number): ParentName {
  const parent = ns.tree.parentOf(entry);
  if (parent >= 0) return ns.keyOf(parent);
  return ns.tree.reachOf(entry) === ORPHANED ? null : "";
}

/** grantRestartTerms gives a key with pages its read lease and, if it is incomplete, its reclaim deadline after a restart (restartTerms). */
function grantRestartTerms(ns: Namespace, entry: number, terms: RestartTerms): void {
  ns.lease(entry, terms.leaseUntilMs, terms.nowMs);
  if (!ns.isComplete(entry)) ns.columns.reclaimAtMs[entry] = terms.reclaimAtMs;
}

/** drainedUntil is how long a stored draining page is held after a restart: at least the restart's read lease (restartTerms). */
function drainedUntil(untilMs: number, terms: RestartTerms): number {
  return Math.max(untilMs, terms.leaseUntilMs);
}

/** statsOf reports a namespace's ranks, by number, and its counts. */
function statsOf(ns: Namespace): NamespaceStatsView {
  const ranks = [...ns.ranks.values()]
    .sort((a, b) => a.rank - b.rank)
    .map((rank) => ({ rank: rank.rank, numPages: rank.numPages, freePages: rank.freePages, reservedPages: rank.reservedPages, usedPages: rank.usedPages }));
  return { namespace: ns.name, worldSize: ns.worldSize, ranks, ...ns.counts() };
}
