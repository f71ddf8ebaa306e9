import { IndexList } from "./index-list.js";
import { KeyColumns } from "./key-columns.js";
import { type KeyList, keyListOf } from "./key-list.js";
import { parseRankScoped } from "./key-scope.js";
import { hashKey, KEY_HASH_SEED, KeyTable, viewOf } from "./key-table.js";
import { KeyTree, REACHABLE } from "./key-tree.js";
import { type EventCounts, type NamespaceCounts, zeroEventCounts } from "./namespace-counters.js";
import { Rank } from "./rank.js";
import { type ShardPart, WHOLE } from "./shards.js";

/** CONFIRMED_RESERVATION, in Namespace.confirm's outcome: the page confirmed was reserved (its reservation ended). */
export const CONFIRMED_RESERVATION = 1;
/** COMPLETED, in Namespace.confirm's outcome: the key became complete. */
export const COMPLETED = 2;

/** SCRATCH holds one key's UTF-8 bytes at a time while a store loads (entryOf). */
const SCRATCH = Buffer.allocUnsafe(4 * 1024);
const SCRATCH_VIEW = viewOf(SCRATCH);

/**
 * Namespace is an independent page space: its ranks, the registry of its
 * keys, their columns, their prefix tree and the lists eviction reads. A
 * key is known by its registry entry, a small integer that indexes the
 * columns (KeyColumns) and every rank's pageOf.
 *
 * Invariants: `keys` holds exactly the keys USED or RESERVED on at least one
 * rank; `confirmedKeys` counts the entries with a confirmed page; a key with
 * confirmed pages is in exactly one list: `incomplete` (by reclaimAtMs: the
 * TTL is one server option, so insertion order is deadline order) unless it
 * is complete, and then, least recently used first, with prefix-aware
 * eviction, in `orphans` when it has no children and is not REACHABLE
 * (KeyTree), else in `leaves` when it has none, else in `lru`; with plain
 * LRU eviction, in `lru` — except while it holds a read lease, when it is
 * in `leased` instead, so that eviction never reads past leased keys.
 *
 * For example, with prefix-aware eviction: a complete key "a" with a child
 * "a/b" is in `lru`, and "a/b" in `leaves`. A GetLocations of "a/b" moves
 * it to `leased`; eviction then finds "a" (in `lru`) and nothing else, and
 * once the lease has ended "a/b" goes back to `leaves`, placed by its last
 * use (returnLeases).
 */
export class Namespace {
  /** layout is what the namespace's pages hold (free text: model, dtype, page bytes, TP size), fixed by its first rank; "" for none. */
  layout = "";
  /** ranks are the initialized ranks, by number. */
  readonly ranks = new Map<number, Rank>();
  /** slots are the same ranks by slot, the index keys' inline pages name (KeyColumns.firstSlot); a dropped rank stays in its slot, empty, until a new rank takes the slot. */
  readonly slots: Rank[] = [];
  /** freeSlots are the slots of dropped ranks, for the next ranks added. */
  private readonly freeSlots: number[] = [];
  /** keys is the key registry: key bytes → entry. */
  readonly keys = new KeyTable();
  /** columns hold each key's counts, read lease and reclaim deadline, by entry. */
  readonly columns = new KeyColumns();
  /** confirmedCount counts the entries of `keys` with a confirmed page (confirmedKeys). */
  private confirmedCount = 0;
  /** tree links each key to its parent (prefix) key. */
  readonly tree = new KeyTree(this.columns);
  /** leaves are the complete keys no registered key names as parent, that a prefix match can reach (prefix-aware eviction). */
  readonly leaves = new IndexList(this.columns.links, 1);
  /** incomplete orders the incomplete keys by reclaimAtMs, earliest first. */
  readonly incomplete = new IndexList(this.columns.links, 2);
  /** lru are the complete keys with children (prefix-aware eviction: the fallback), or all of them (plain LRU eviction). */
  readonly lru = new IndexList(this.columns.links, 3);
  /** orphans are the complete keys without children that a prefix match cannot reach (prefix-aware eviction). */
  readonly orphans = new IndexList(this.columns.links, 4);
  /**
   * leased are the complete keys with a read lease, in the order the leases
   * were given: every lease lasts the same TTL, so that is the order they
   * end in (a lease given again goes to the back).
   */
  readonly leased = new IndexList(this.columns.links, 5);
  /** evictionOrder is the order eviction reads the lists of complete keys in, each with the counter of the evictions it gives. */
  readonly evictionOrder = [
    { list: this.orphans, cause: "orphanEvictions" },
    { list: this.leaves, cause: "leafEvictions" },
    { list: this.lru, cause: "lruEvictions" },
  ] as const;
  /** lists are every list by its id (Links.list), for the list that holds a key. */
  private readonly lists: readonly (IndexList | undefined)[] = [undefined, this.leaves, this.incomplete, this.lru, this.orphans, this.leased];
  /** events counts what happened to the namespace since the process started (evictions, expirations, reclaims). */
  readonly events: EventCounts = zeroEventCounts();
  /** lastCallMs is when a worker's or a scheduler's call last named the namespace (a reset refuses one in use); -Infinity for none since the process started. */
  lastCallMs = Number.NEGATIVE_INFINITY;
  /** label is the namespace's name as clients give it: `name` but for one rank of a namespace of KEY_SCOPE_RANK (key-scope.ts). */
  readonly label: string;
  /** scopedRank is the rank this namespace is, in a namespace of KEY_SCOPE_RANK; undefined for KEY_SCOPE_NAMESPACE. */
  readonly scopedRank: number | undefined;

  constructor(
    readonly name: string,
    /** worldSize is the number of ranks; 0 when unknown. Fixed by the first worker. */
    readonly worldSize: number,
    /** prefixAware: eviction keeps what prefix matches reach (leaves and orphans first); false: plain LRU. */
    readonly prefixAware = true,
    /** orphaned hears of each key that lost its parent because the parent left the registry (the journal names parents). */
    private readonly orphaned: (entry: number) => void = () => {},
    /** part is the part of each rank's pages this namespace hands out (a shard of a cluster; WHOLE: all). */
    private readonly part: ShardPart = WHOLE,
  ) {
    const scoped = parseRankScoped(name);
    this.label = scoped?.name ?? name;
    this.scopedRank = scoped?.rank;
  }

  /** counts gives every counter of NAMESPACE_COUNTERS: the sizes of the registry, then the events. */
  counts(): NamespaceCounts {
    return { keys: this.confirmedKeys, completeKeys: this.completeKeys, ...this.events };
  }

  /** confirmedKeys is the number of entries of `keys` with a confirmed page. */
  get confirmedKeys(): number {
    return this.confirmedCount;
  }

  /** completeKeys is the number of complete keys. */
  get completeKeys(): number {
    return this.leaves.size + this.lru.size + this.orphans.size + this.leased.size;
  }

  /**
   * removeRank takes a rank that holds no page out of the namespace; its
   * slot stays (empty, so slot loops pass it) until a new rank takes it.
   */
  removeRank(rankNo: number): void {
    const rank = this.ranks.get(rankNo);
    if (rank === undefined) return;
    if (rank.heldPages !== 0) throw new Error(`rank ${rankNo} of namespace "${this.name}" still holds pages`);
    this.ranks.delete(rankNo);
    this.freeSlots.push(rank.slot);
  }

  /** requiredRanks is how many ranks must confirm a key for it to be complete now: one where each rank keeps its own keys. */
  get requiredRanks(): number {
    if (this.scopedRank !== undefined) return 1;
    return this.worldSize > 0 ? this.worldSize : this.ranks.size;
  }

  /** addRank creates a rank in a slot a dropped rank left, else in the next one. */
  addRank(rankNo: number, numPages: number): Rank {
    const slot = this.freeSlots.pop() ?? this.slots.length;
    const rank = new Rank(rankNo, numPages, slot, this.columns, this.part);
    this.ranks.set(rankNo, rank);
    this.slots[slot] = rank;
    return rank;
  }

  /** findAll returns the entry of every key of a call (-1 for an unknown key). */
  findAll(keys: KeyList): Int32Array {
    const found = new Int32Array(keys.length);
    this.keys.findAll(keys.bytes, keys.starts, keys.ends, keys.hashes(), found, keys.view);
    return found;
  }

  /** entryAt finds the entry of key i of a call, registering the key when it is unknown. */
  entryAt(keys: KeyList, i: number): number {
    return this.registered(keys.bytes, keys.starts[i]!, keys.ends[i]!, keys.hash(i), keys.view);
  }

  /**
   * entryOf is entryAt for a key given as a string (recovery, a record at a
   * time): it encodes the key into one scratch buffer, so loading a store
   * makes no buffer, list or hash array per key.
   */
  entryOf(key: string): number {
    return this.byName(key, true);
  }

  /** byName finds the entry of a key given as a string through the scratch buffer, registering it if asked. */
  private byName(key: string, register: boolean): number {
    // A UTF-16 unit is at most 3 UTF-8 bytes, so a key that may not fit takes the general path.
    if (key.length * 3 > SCRATCH.length) {
      const keys = keyListOf([key]);
      return register ? this.entryAt(keys, 0) : this.findAt(keys, 0);
    }
    const end = SCRATCH.write(key, 0, "utf8");
    const hash = hashKey(SCRATCH, 0, end, KEY_HASH_SEED, SCRATCH_VIEW);
    return register ? this.registered(SCRATCH, 0, end, hash, SCRATCH_VIEW) : this.keys.find(SCRATCH, 0, end, hash, SCRATCH_VIEW);
  }

  /** findAt is the entry of key i of a call, -1 when it is not registered. */
  findAt(keys: KeyList, i: number): number {
    return this.keys.find(keys.bytes, keys.starts[i]!, keys.ends[i]!, keys.hash(i), keys.view);
  }

  /** registered finds the entry of the key at bytes[start .. end), registering the key, holding nothing, when it is unknown. */
  private registered(bytes: Buffer, start: number, end: number, hash: number, view: DataView): number {
    const found = this.keys.find(bytes, start, end, hash, view);
    if (found >= 0) return found;
    const entry = this.keys.insert(bytes, start, end, hash, view);
    this.columns.fresh(entry);
    return entry;
  }

  /** lookup is entryOf without registering: -1 for a key not registered. */
  lookup(key: string): number {
    return this.byName(key, false);
  }

  /** keyOf names the key of a live entry. */
  keyOf(entry: number): string {
    return this.keys.keyOf(entry);
  }

  /** isComplete tells whether key e is complete: confirmed on the required ranks, and not dropped since. */
  isComplete(entry: number): boolean {
    const list = this.columns.links.list[entry];
    return list !== 0 && list !== this.incomplete.listId;
  }

  /** complete lists key e, which is in no list, as complete, the most recently used (at nowMs). */
  complete(entry: number, nowMs: number): void {
    this.columns.usedAtMs[entry] = nowMs;
    const leases = this.columns.leaseUntilMs;
    if (leases[entry]! <= nowMs) {
      this.evictionList(entry).add(entry);
      return;
    }
    // Leased already (a restart's lease, or a read of an incomplete key): it joins the leased keys at the back, so its
    // lease lasts as long as the last one's, never less, and the leased keys stay in the order their leases end.
    const last = this.leased.last;
    if (last >= 0 && leases[last]! > leases[entry]!) leases[entry] = leases[last]!;
    this.leased.add(entry);
  }

  /** lease gives key e, at nowMs, a read lease until untilMs (never shortening one); a complete key leaves the eviction lists meanwhile. */
  lease(entry: number, untilMs: number, nowMs: number): void {
    if (untilMs <= nowMs) return; // a lease of no time (readLeaseTtlMs 0) is none
    const leases = this.columns.leaseUntilMs;
    if (leases[entry]! < untilMs) leases[entry] = untilMs;
    if (!this.isComplete(entry)) return;
    if (this.leased.has(entry)) this.leased.moveToBack(entry);
    else {
      this.unlist(entry);
      this.leased.add(entry);
    }
  }

  /** returnLeases puts the keys whose leases ended by nowMs back in their eviction lists: O(1) for each key returned. */
  returnLeases(nowMs: number): void {
    const leases = this.columns.leaseUntilMs;
    for (let entry = this.leased.first; entry >= 0 && leases[entry]! <= nowMs; entry = this.leased.first) {
      this.leased.delete(entry);
      this.place(entry, false);
    }
  }

  /** unlist takes key e off whichever list holds it. */
  unlist(entry: number): void {
    this.lists[this.columns.links.list[entry]!]?.delete(entry);
  }

  /** evictionList is the list that holds key e while it is complete (see the invariants). */
  private evictionList(entry: number): IndexList {
    if (!this.prefixAware || this.tree.hasChildren(entry)) return this.lru;
    return this.tree.reachOf(entry) === REACHABLE ? this.leaves : this.orphans;
  }

  /**
   * relist moves a complete key e to the list it now belongs in, if that
   * changed. Its place there follows its last use: first when it was used
   * no later than the list's oldest (a parent whose last child eviction
   * just took was read before that child), else last, as recently used;
   * O(1), and never earlier than its use says.
   */
  private relist(entry: number): void {
    if (!this.isComplete(entry) || this.leased.has(entry)) return;
    if (this.evictionList(entry).has(entry)) return;
    this.unlist(entry);
    this.place(entry);
  }

  /** place lists a complete key that is in no list in its eviction list, by its last use (relist); keys returning from their leases come in use order, so a tie goes last for them. */
  private place(entry: number, tiesFirst = true): void {
    const to = this.evictionList(entry);
    const used = this.columns.usedAtMs;
    const first = to.first;
    if (first >= 0 && (used[entry]! < used[first]! || (tiesFirst && used[entry] === used[first]))) to.addFront(entry);
    else to.add(entry);
  }

  /**
   * adopt makes `parent` the parent of key e, which has none: a parent with
   * its first child leaves its list of leaves; under a parent that a prefix
   * match cannot reach, neither can e or any key below it (a restore may
   * link a key that has children already).
   */
  adopt(entry: number, parent: number): void {
    if (this.tree.attach(entry, parent)) this.relist(parent);
    if (this.tree.reachOf(entry) !== REACHABLE) this.tree.cutBelow(entry, this.cut);
  }

  /** adoptByName makes the registered key named `parent` the parent of key e, which has none; false when no other registered key has that name. */
  adoptByName(entry: number, parent: string): boolean {
    const found = this.lookup(parent);
    if (found < 0 || found === entry) return false;
    this.adopt(entry, found);
    return true;
  }

  /** orphan marks key e, which has no parent, as one whose parent is gone: neither it nor any key below it can be reached. */
  orphan(entry: number): void {
    this.tree.orphan(entry);
    this.tree.cutBelow(entry, this.cut);
  }

  /** confirmedPages lists key e's confirmed pages as (rank number, page) pairs, by slot. */
  confirmedPages(entry: number): number[] {
    const pages: number[] = [];
    // The count says when the last page is found: the ranks after it are not read.
    for (let slot = 0, left = this.columns.confirmed[entry]!; left > 0; slot++) {
      const rank = this.slots[slot]!;
      const page = rank.confirmedPage(entry);
      if (page < 0) continue;
      pages.push(rank.rank, page);
      left--;
    }
    return pages;
  }

  /**
   * forgetIfEmpty drops a key that holds nothing from the registry, and from
   * the tree: its parent may become a leaf, its children become orphans.
   */
  forgetIfEmpty(entry: number): void {
    if (!this.columns.holdsNothing(entry)) return;
    const childless = this.tree.detach(entry);
    if (childless >= 0) this.relist(childless);
    if (this.tree.hasChildren(entry)) this.tree.sever(entry, this.cut, this.orphaned);
    this.keys.delete(entry);
  }

  /** cut moves a key that a prefix match can no longer reach to the orphans, if it is a complete leaf. */
  private readonly cut = (entry: number) => this.relist(entry);

  /**
   * confirm makes `page` of `rank` key e's confirmed page there, and lists
   * the key: its first page counts it and lists it incomplete until
   * reclaimAtMs; the page that brings it to requiredRanks makes it complete
   * (at nowMs). Returns CONFIRMED_RESERVATION when the page was reserved
   * (not a lapsed reservation's), plus COMPLETED when the key became complete.
   */
  confirm(rank: Rank, entry: number, page: number, nowMs: number, reclaimAtMs: number): number {
    const firstPage = this.columns.confirmed[entry] === 0;
    const outcome = rank.confirm(entry, page) ? CONFIRMED_RESERVATION : 0;
    if (firstPage) {
      this.confirmedCount++;
      this.columns.reclaimAtMs[entry] = reclaimAtMs;
    }
    if (this.isComplete(entry) || this.columns.confirmed[entry]! < this.requiredRanks) {
      if (firstPage) this.incomplete.add(entry);
      return outcome;
    }
    if (!firstPage) this.incomplete.delete(entry);
    this.complete(entry, nowMs);
    return outcome | COMPLETED;
  }

  /**
   * restoreConfirmed lists a restored key whose pages the ranks hold
   * already (Rank.restoreUsed): complete as the store says, or incomplete.
   */
  restoreConfirmed(entry: number, complete: boolean, nowMs: number): void {
    this.confirmedCount++;
    if (complete) this.complete(entry, nowMs);
    else this.incomplete.add(entry);
  }

  /**
   * completeReady makes complete each incomplete key confirmed on the
   * required ranks (fewer now that a rank went), and hears of each.
   */
  completeReady(nowMs: number, completed: (entry: number) => void): void {
    for (const entry of [...this.incomplete]) {
      if (this.columns.confirmed[entry]! < this.requiredRanks) continue;
      this.incomplete.delete(entry);
      this.complete(entry, nowMs);
      completed(entry);
    }
  }

  /**
   * unconfirmed takes a key whose pages are about to go off its list and
   * out of the count; the ranks then drop its pages (Rank.dropConfirmed).
   * False when it has none.
   */
  unconfirmed(entry: number): boolean {
    if (this.columns.confirmed[entry] === 0) return false;
    this.unlist(entry);
    this.confirmedCount--;
    return true;
  }

  /** endLease ends key e's read lease (it is being dropped). */
  endLease(entry: number): void {
    this.columns.leaseUntilMs[entry] = 0;
  }

  /**
   * reclaimDue hands `drop` each incomplete key past its reclaim deadline
   * at nowMs, oldest first. A read-leased one waits for its lease: it goes
   * to the back with the lease's end as its deadline (later than it needs,
   * never early).
   */
  reclaimDue(nowMs: number, drop: (entry: number) => void): void {
    const columns = this.columns;
    for (const entry of this.incomplete) {
      if (columns.reclaimAtMs[entry]! > nowMs) return;
      if (columns.leaseUntilMs[entry]! > nowMs) {
        columns.reclaimAtMs[entry] = columns.leaseUntilMs[entry]!;
        this.incomplete.moveToBack(entry);
        continue;
      }
      drop(entry);
    }
  }

  /**
   * grantRestart gives a key with pages, as a state starts to serve after
   * a restart or takeover, a read lease until leaseUntilMs and, if it is
   * incomplete, a fresh reclaim deadline.
   */
  grantRestart(entry: number, leaseUntilMs: number, reclaimAtMs: number, nowMs: number): void {
    this.lease(entry, leaseUntilMs, nowMs);
    if (!this.isComplete(entry)) this.columns.reclaimAtMs[entry] = reclaimAtMs;
  }

  /** touch marks a complete key as used at nowMs, the most recently used. */
  touch(entry: number, nowMs: number): void {
    if (!this.isComplete(entry)) return;
    this.columns.usedAtMs[entry] = nowMs;
    // A leased key keeps its place, which is its lease's: it is placed by this use when the lease ends.
    if (!this.leased.has(entry)) this.lists[this.columns.links.list[entry]!]!.moveToBack(entry);
  }
}
