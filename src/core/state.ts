import { AllocationStatus, Role } from "../../gen/hf3fs/metadata/v1/metadata_pb.js";
import type { Change } from "./change.js";
import type { Clock } from "./clock.js";
import { invalidArgument, MetadataError, Reason } from "./errors.js";
import { Eviction } from "./eviction.js";
import type { Journal } from "./journal.js";
import type { KeyList, Keys } from "./key-list.js";
import { KeyScope } from "./key-scope.js";
import { COMPLETED, CONFIRMED_RESERVATION, type Namespace } from "./namespace.js";
import type { Rank } from "./rank.js";
import { clearNamespace, dropRank, type InitializeRankResult, initializeRank, type RankDeclaration, type ResetResult, resetNamespace } from "./rank-admin.js";
import { type Restoring, restoring } from "./recovery.js";
import { Registry } from "./registry.js";
import { foreignKey, ownsKey } from "./shards.js";
import type { StateOptions } from "./state-options.js";
import { keysExist, type StateReads, statsIn } from "./state-reads.js";
import { stateRecords } from "./state-records.js";
import type { AllocateResult, ConfirmResult } from "./state-results.js";
import { type NamespaceStatsView, type RankStatsView, statsInOrder, statsPage } from "./stats-views.js";
import { allocateCall, checkPages, checkUint32, confirmCall, keysCall, namespaceName } from "./validate.js";

export type { AllocateResult, ConfirmResult, InitializeRankResult, NamespaceStatsView, RankStatsView };
export { AllocationStatus, KeyScope, Role };

/** inside reads a state's namespaces (set by MetadataState's static block, which may; namespacesOf). */
let inside: (state: MetadataState) => ReadonlyMap<string, Namespace>;

/**
 * MetadataState is the state machine as it serves: the commands on
 * namespaces of ranks of pages, the key registry, reservations, read
 * leases and eviction (Eviction). Recovery (recovery.ts) fills it from a
 * store; a hot standby's state is a ReplayState until it takes over.
 *
 * It is synchronous and does no I/O: each operation validates its whole
 * input, then applies all of it, so it is atomic. Time comes from the
 * injected clock; due deadlines (expired reservations, reclaimed incomplete
 * keys, ended drains) are processed at the start of every operation (and by
 * `expire`). Every durable effect is appended to a journal
 * that the caller takes with `takeChanges` and persists before replying.
 */
export class MetadataState implements StateReads {
  readonly options: StateOptions;
  private readonly registry: Registry;
  private readonly namespaces: Map<string, Namespace>;
  private readonly journal: Journal;
  private readonly eviction: Eviction;

  /**
   * @param clock the time source.
   * @param options the rules; missing ones take their defaults.
   * @param journal whether to record changes (off for a state nobody persists).
   */
  constructor(clock: Clock, options: Partial<StateOptions> = {}, journal = true) {
    this.registry = MetadataState.adopting ?? new Registry(clock, options, journal);
    MetadataState.adopting = undefined;
    this.options = this.registry.options;
    this.namespaces = this.registry.namespaces;
    this.journal = this.registry.journal;
    this.eviction = new Eviction(this.registry);
  }

  /** adopting is the registry `serving` hands to the constructor, within that one call: a takeover's, instead of a new one. */
  private static adopting: Registry | undefined;

  /** serving is the state that serves a registry a replay filled: the takeover's own factory (internal: ReplayState.takeOver). */
  static serving(registry: Registry): MetadataState {
    MetadataState.adopting = registry;
    return new MetadataState(registry.clock);
  }

  static {
    inside = (state) => state.namespaces;
  }

  /** records lists the state as the records of a store that holds it (stateRecords): a leader's store written whole from memory. */
  records(): Change[] {
    return stateRecords(this.namespaces.values());
  }

  /** takeChanges returns the changes recorded since the last call, in order; the caller owns the array. */
  takeChanges(): readonly Change[] {
    return this.journal.take();
  }

  /** restore rebuilds an empty state from stored state (restoring, all at once). */
  restore(stored: Iterable<Change>): void {
    const restore = this.restoring();
    for (const change of stored) restore.add(change);
    restore.finish();
  }

  /** restoring is restore a change at a time for a caller that yields between batches (loadState): `add`, `link`, then `finish`. */
  restoring(): Restoring {
    return restoring(this.registry);
  }

  /** initializeRank creates a rank, or checks it exists alike, resizing it to numPages (rank-admin.ts; RankDeclaration says the rest). */
  initializeRank(namespace: string, rankNo: number, numPages: number, worldSize: number, declared: RankDeclaration = {}): InitializeRankResult {
    return initializeRank(this.registry, namespace, rankNo, numPages, worldSize, declared);
  }

  /** dropRank removes a rank, an admin's call (rank-admin.ts); returns how many keys were forgotten. */
  dropRank(namespace: string, rankNo: number): number {
    return dropRank(this.registry, this.eviction, namespace, rankNo);
  }

  /** reset forgets a namespace whole (undefined: all), an admin's call (rank-admin.ts); refused while in use unless force; with validateOnly, checks and counts only. */
  reset(namespace: string | undefined, force: boolean, validateOnly = false): ResetResult {
    return resetNamespace(this.registry, this.eviction, namespace, force, validateOnly);
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
    const { name, keys, prefixes } = allocateCall(namespace, keyBatch, prefixKeys, this.options);
    this.checkOwned(name, keys);
    this.expire();
    const { ns, rank } = this.registry.rankOf(name, rankNo);
    const now = this.registry.clock();
    ns.lastCallMs = now;
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
          this.journal.reserve(ns, rank, entry, held);
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
        if (this.eviction.evictOne(ns, rank, batch, now)) {
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
      this.journal.reserve(ns, rank, entry, page);
      pages[i] = page;
      statuses[i] = AllocationStatus.NEW;
    }
    this.registry.deadlines.armReservations(ns, rank);
    this.eviction.noteCrowding(ns, rank);
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
   * is an orphan (no prefix match reaches it), unless another shard owns
   * the prefix: it is not here to be found, and the key is a root on this
   * shard, as reachable as its own shard says.
   */
  private attachParent(ns: Namespace, entry: number, keys: KeyList, prefixes: KeyList, i: number, placed: Int32Array): void {
    if (prefixes.byteLength(i) === 0) return;
    let parent = i > 0 && placed[i - 1]! >= 0 && prefixes.equals(i, keys, i - 1) ? placed[i - 1]! : -1;
    if (parent < 0) parent = ns.findAt(prefixes, i);
    if (parent >= 0) ns.adopt(entry, parent);
    else if (ownsKey(ns.label, prefixes, i, this.registry.part)) ns.orphan(entry);
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
    const { name, keys, releasing } = confirmCall(namespace, keyBatch, pages, pagesToRelease, keysToRelease, this.options);
    this.checkOwned(name, keys);
    this.expire();
    const { ns, rank } = this.registry.rankOf(name, rankNo);
    ns.lastCallMs = this.registry.clock();
    const subject = { namespace: name, rank: rankNo };
    checkPages(pages, "pages", rank.numPages, subject);
    checkPages(pagesToRelease, "pages_to_release", rank.numPages, subject);
    const found = this.checkConfirmable(ns, rank, keys, pages, pagesToRelease, subject);

    const now = this.registry.clock();
    const reclaimAtMs = now + this.options.incompleteTtlMs;
    const result: ConfirmResult = { confirmed: 0, released: 0, completed: [] };
    for (let i = 0; i < keys.length; i++) {
      const page = pages[i]!;
      // A key repeated in the batch, or confirmed through a lapse, may have got its entry at an earlier position.
      const entry = found[i]! >= 0 ? found[i]! : ns.entryAt(keys, i);
      if (rank.confirmedPage(entry) === page) continue;
      const outcome = ns.confirm(rank, entry, page, now, reclaimAtMs);
      if (outcome & CONFIRMED_RESERVATION) this.journal.record({ kind: "unreserve", namespace: ns.name, rank: rankNo, page, confirmed: true });
      if (outcome & COMPLETED) result.completed.push(i);
      result.confirmed++;
      this.journal.key(ns, entry);
    }
    this.registry.deadlines.armIncomplete(ns);
    const releasers = releasing === undefined ? undefined : ns.findAll(releasing);
    for (let i = 0; releasers !== undefined && i < pagesToRelease.length; i++) {
      const page = pagesToRelease[i]!;
      const holder = rank.reservedBy(page);
      if (holder < 0 || holder !== releasers[i]) continue;
      ns.forgetIfEmpty(rank.releaseReservation(page));
      this.journal.record({ kind: "unreserve", namespace: ns.name, rank: rankNo, page });
      result.released++;
    }
    // Reserved pages cannot be evicted, confirmed ones can: a rank crowded by this call's reservations is worth a look now.
    this.eviction.noteCrowding(ns, rank);
    return result;
  }

  /**
   * checkOwned refuses keys to write that another shard owns: a caller that
   * routes calls itself (with a hash other than the contract's, or shards
   * in another order) would otherwise place them where no other caller
   * looks for them, and a key could be held on two shards at once.
   */
  private checkOwned(name: string, keys: KeyList): void {
    const foreign = foreignKey(name, keys, this.registry.part);
    if (foreign === undefined) return;
    const { count, index } = this.registry.part;
    const key = keys.key(foreign.position);
    throw invalidArgument(
      "keys",
      `key "${key.slice(0, 64)}" belongs to shard ${foreign.shard} of ${count}, not to this one (${index}): a caller that routes its calls sends each shard the keys docs/contract.md's hash gives it`,
      { namespace: name, key: key.slice(0, 64) },
    );
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
   * batchExists tells, per key, whether it is complete in the namespace
   * (with KEY_SCOPE_RANK: held by every rank), or with a rank, whether it is
   * confirmed on that rank.
   */
  batchExists(namespace: string, keyBatch: Keys, rankNo?: number): boolean[] {
    this.expire();
    return keysExist(this.registry, namespace, keyBatch, rankNo, this.registry.clock());
  }

  /**
   * getLocations returns each key's page on a rank (-1 where not found) and
   * gives each found key a read lease.
   */
  getLocations(namespace: string, rankNo: number, keyBatch: Keys, includeIncomplete = false): number[] {
    const { name, keys } = keysCall(namespace, keyBatch, this.options);
    this.expire();
    const { ns, rank } = this.registry.rankOf(name, rankNo);
    const now = this.registry.clock();
    ns.lastCallMs = now;
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

  /**
   * deleteKeys drops keys at once, from every rank, or with a rank of a
   * namespace of KEY_SCOPE_RANK from that rank only; pages of read-leased
   * keys stay held until the lease ends. Returns how many of the keys were
   * held (on some rank) and are gone.
   */
  deleteKeys(namespace: string, keyBatch: Keys, rankNo?: number): number {
    const { name, keys } = keysCall(namespace, keyBatch, this.options);
    const parts = this.partsFor(name, rankNo, "DeleteKeys");
    this.expire();
    const deleted = new Uint8Array(keys.length);
    for (const ns of parts) {
      // A key repeated in the call finds its entry already dropped: no pages left.
      const found = ns.findAll(keys);
      for (let i = 0; i < keys.length; i++) {
        const entry = found[i]!;
        if (entry < 0 || ns.columns.confirmed[entry] === 0) continue;
        this.registry.dropKey(ns, entry);
        deleted[i] = 1;
      }
    }
    return deleted.reduce((sum, d) => sum + d, 0);
  }

  /**
   * clear drops every key and reservation of a namespace (with a rank of a
   * namespace of KEY_SCOPE_RANK, of that rank only), or of all namespaces
   * when namespace is undefined. The ranks stay initialized.
   */
  clear(namespace: string | undefined, rankNo?: number): void {
    const name = namespace === undefined ? undefined : namespaceName(namespace, this.options);
    if (name === undefined && rankNo !== undefined) throw invalidArgument("rank", "Clear of every namespace (all_namespaces) takes no rank");
    const parts = name === undefined ? [...this.namespaces.values()] : this.partsFor(name, rankNo, "Clear");
    this.expire();
    for (const ns of parts) {
      if (ns.keys.size > 0) clearNamespace(this.registry, this.eviction, ns);
      else for (const rank of ns.ranks.values()) rank.forgetLapses();
    }
  }

  /**
   * partsFor are the namespaces a DeleteKeys or Clear of `name` acts on:
   * all of the namespace, or with a rank its rank's (KEY_SCOPE_RANK only:
   * a namespace whose keys span its ranks cannot lose a key on one rank).
   */
  private partsFor(name: string, rankNo: number | undefined, call: string): Namespace[] {
    if (rankNo === undefined) return this.registry.parts(name);
    checkUint32(rankNo, "rank");
    const scope = this.registry.scopeOf(name);
    if (scope === KeyScope.UNSPECIFIED) return [];
    if (scope === KeyScope.NAMESPACE) {
      throw invalidArgument("rank", `namespace "${name}" keeps each key across its ranks (KEY_SCOPE_NAMESPACE): ${call} takes no rank`, {
        namespace: name,
        rank: rankNo,
      });
    }
    return [this.registry.rankOf(name, rankNo).ns];
  }

  /** stats counts pages and keys of a namespace, or of all namespaces when namespace is undefined. */
  stats(namespace: string | undefined): NamespaceStatsView[] {
    if (namespace !== undefined) namespaceName(namespace, this.options); // a bad name is refused before anything is processed
    this.expire();
    return statsIn(this.registry, namespace);
  }

  /** statsPage reports at most `size` namespaces, by name, from the first after `after` (statsPage). */
  statsPage(after: string, size: number): { views: NamespaceStatsView[]; next: string } {
    this.expire();
    return statsPage(this.registry, after, size);
  }

  /** peekStats reports every namespace as it stands, processing nothing due: a scrape or a page must change nothing (statsInOrder). */
  peekStats(): NamespaceStatsView[] {
    return statsInOrder(this.namespaces.values(), this.registry);
  }

  /** expire processes every deadline that is due: expired reservations, stale incomplete keys, ended drains. */
  expire(): void {
    this.registry.expire();
  }

  /** evictionPending tells whether a rank is crowded: evictAhead has work. */
  get evictionPending(): boolean {
    return this.eviction.pending;
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
    return this.eviction.evictAhead(maxKeys);
  }

  /** keyScopeOf is a namespace's KeyScope, UNSPECIFIED while it has no rank. */
  keyScopeOf(namespace: string): KeyScope {
    return this.registry.scopeOf(namespaceName(namespace, this.options));
  }

  /** checkRank throws RANK_NOT_INITIALIZED unless the rank is initialized (for APIs that name a rank on every call). */
  checkRank(namespace: string, rankNo: number): void {
    this.registry.rankOf(namespaceName(namespace, this.options), rankNo);
  }
}

/**
 * namespacesOf is a state's own Namespace objects, for white-box tests and
 * probes: the core's internals, which its face (core/index.ts) does not
 * export; the layers above read peekStats.
 */
export function namespacesOf(state: MetadataState): ReadonlyMap<string, Namespace> {
  return inside(state);
}
