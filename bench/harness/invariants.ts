import { BELOW_ORPHAN, ORPHANED, REACHABLE } from "../../src/core/key-tree.js";
import type { Namespace } from "../../src/core/namespace.js";
import { DRAINING, FREE, NO_OWNER, RESERVED, USED } from "../../src/core/page-pool.js";
import { ownedPages } from "../../src/core/shards.js";
import type { MetadataState } from "../../src/core/state.js";
import { namespacesOf } from "../../src/core/state.js";

/**
 * assertInvariants walks every page of every rank and every registered key
 * and throws on the first broken invariant: each page in exactly one state,
 * counts adding up, no page held by two keys, the registry, the key columns
 * and the lists matching the ranks.
 */
export function assertInvariants(state: MetadataState): void {
  for (const ns of namespacesOf(state).values()) {
    const live = [...ns.keys.live()];
    const isLive = new Set(live);
    const confirmations = new Map<number, number>();
    const reservations = new Map<number, number>();
    const count = (counts: Map<number, number>, entry: number) => counts.set(entry, (counts.get(entry) ?? 0) + 1);
    for (const rank of ns.ranks.values()) {
      const where = `namespace ${ns.name} rank ${rank.rank}`;
      const pool = rank.pool;
      // Pages never handed out are free by construction; walking them would take minutes on a rank of 2^31 pages.
      // A shard's rank holds its own pages only (p mod count = index): the others are never handed out, and not counted.
      let free = rank.ownedPages - ownedPages(pool.handedOut, pool.part);
      let reserved = 0;
      let used = 0;
      for (let page = 0; page < pool.handedOut; page++) {
        if (!pool.owns(page)) {
          if (pool.kindOf(page) !== FREE) throw new Error(`${where}: page ${page} of another shard is held`);
          continue;
        }
        const kind = pool.kindOf(page);
        const owner = pool.ownerOf(page);
        if (kind === FREE || kind === DRAINING) {
          if (owner !== NO_OWNER) throw new Error(`${where}: ${kind === FREE ? "free" : "draining"} page ${page} has an owner`);
          if (kind === FREE) free++;
          else used++;
          if ((kind === DRAINING) !== rank.draining.has(page)) throw new Error(`${where}: page ${page} draining and the drains disagree`);
          continue;
        }
        if (!isLive.has(owner)) throw new Error(`${where}: page ${page} held by entry ${owner}, which is not registered`);
        const key = ns.keyOf(owner);
        if (rank.pageOf(owner) !== page) throw new Error(`${where}: page ${page} held by ${key}, whose page here is ${rank.pageOf(owner)}`);
        if ((kind === RESERVED) !== rank.reservations.has(page)) throw new Error(`${where}: page ${page} reserved and the expiry order disagree`);
        if (kind === RESERVED) {
          reserved++;
          count(reservations, owner);
        } else if (kind === USED) {
          used++;
          count(confirmations, owner);
        } else throw new Error(`${where}: page ${page} of unknown kind ${kind}`);
      }
      if (free + reserved + used !== rank.ownedPages) throw new Error(`${where}: states do not add up`);
      if (free !== rank.freePages) throw new Error(`${where}: ${free} free pages, pool says ${rank.freePages}`);
      if (reserved !== rank.reservedPages) throw new Error(`${where}: ${reserved} reserved pages, the expiry order holds ${rank.reservedPages}`);
      if (used !== rank.usedPages) throw new Error(`${where}: ${used} used pages, counters say ${rank.usedPages}`);
      let lastExpiry = -Infinity;
      for (const page of rank.reservations) {
        if (rank.expiresAtMs(page) < lastExpiry) throw new Error(`${where}: reservations out of expiry order`);
        lastExpiry = rank.expiresAtMs(page);
      }
      for (const entry of live) {
        const page = rank.pageOf(entry);
        if (page >= 0 && pool.ownerOf(page) !== entry) throw new Error(`${where}: ${ns.keyOf(entry)} names page ${page}, which it does not hold`);
      }
      for (const [page, key] of rank.lapsed) {
        if (pool.kindOf(page) !== FREE) throw new Error(`${where}: lapsed page ${page} of ${key} is not free`);
      }
    }
    const columns = ns.columns;
    let confirmedKeys = 0;
    let complete = 0;
    let incomplete = 0;
    for (const entry of live) {
      const key = ns.keyOf(entry);
      if (ns.lookup(key) !== entry) throw new Error(`namespace ${ns.name}: ${key} is not found under its key`);
      const confirmed = confirmations.get(entry) ?? 0;
      if (columns.confirmed[entry] !== confirmed) throw new Error(`namespace ${ns.name}: ${key} counts ${columns.confirmed[entry]} ranks, has ${confirmed}`);
      if (columns.reserved[entry] !== (reservations.get(entry) ?? 0))
        throw new Error(`namespace ${ns.name}: ${key} counts ${columns.reserved[entry]} reservations, has ${reservations.get(entry) ?? 0}`);
      if (confirmed === 0 && columns.reserved[entry] === 0) throw new Error(`namespace ${ns.name}: ${key} holds nothing but is registered`);
      assertTreeAround(ns, entry, isLive);
      const lists = [ns.leaves, ns.lru, ns.orphans, ns.incomplete, ns.leased];
      const listed = lists.filter((list) => list.has(entry)).length;
      if (confirmed === 0) {
        if (listed !== 0) throw new Error(`namespace ${ns.name}: ${key} has no page but is listed`);
        continue;
      }
      if (listed !== 1) throw new Error(`namespace ${ns.name}: ${key} is in ${listed} of the lists`);
      confirmedKeys++;
      if (ns.incomplete.has(entry)) {
        incomplete++;
        continue;
      }
      complete++;
      if (ns.leased.has(entry)) {
        if (!(columns.leaseUntilMs[entry]! > 0)) throw new Error(`namespace ${ns.name}: ${key} is among the leased keys without a lease`);
        continue;
      }
      const tree = ns.tree;
      const belongs = !ns.prefixAware || tree.hasChildren(entry) ? ns.lru : tree.reachOf(entry) === REACHABLE ? ns.leaves : ns.orphans;
      if (!belongs.has(entry)) throw new Error(`namespace ${ns.name}: complete ${key} is not in the list its children and reach say`);
    }
    // The leased keys stand in the order their leases end, so that returning them reads only the front.
    for (let e = ns.leased.first, n = ns.leased.after(e); n >= 0; e = n, n = ns.leased.after(n)) {
      if (columns.leaseUntilMs[n]! < columns.leaseUntilMs[e]!) throw new Error(`namespace ${ns.name}: ${ns.keyOf(n)}'s lease ends before the one ahead of it`);
    }
    if (confirmedKeys !== ns.confirmedKeys) throw new Error(`namespace ${ns.name}: ${ns.confirmedKeys} confirmed keys counted for ${confirmedKeys} held`);
    if (live.length !== ns.keys.size) throw new Error(`namespace ${ns.name}: the registry counts ${ns.keys.size} keys, holds ${live.length}`);
    if (ns.completeKeys !== complete) throw new Error(`namespace ${ns.name}: the lists hold ${ns.completeKeys} keys for ${complete} complete`);
    if (ns.incomplete.size !== incomplete) throw new Error(`namespace ${ns.name}: the incomplete list holds ${ns.incomplete.size} keys for ${incomplete}`);
  }
}

/**
 * assertTreeAround checks key e's place in the prefix tree (KeyTree): its
 * parent is registered and lists it among its children, its children name
 * it, and its reach follows from its parent's.
 */
function assertTreeAround(ns: Namespace, entry: number, isLive: Set<number>): void {
  const key = ns.keyOf(entry);
  const { parent, firstChild, nextSibling, reach } = ns.columns;
  const p = parent[entry]!;
  if (p >= 0) {
    if (!isLive.has(p)) throw new Error(`namespace ${ns.name}: ${key}'s parent entry ${p} is not registered`);
    let listed = false;
    for (let c = firstChild[p]!; c >= 0; c = nextSibling[c]!) listed ||= c === entry;
    if (!listed) throw new Error(`namespace ${ns.name}: ${key} is not among the children of its parent ${ns.keyOf(p)}`);
    const expected = reach[p] === REACHABLE ? REACHABLE : BELOW_ORPHAN;
    if (reach[entry] !== expected) throw new Error(`namespace ${ns.name}: ${key} has reach ${reach[entry]}, its parent ${reach[p]}`);
  } else if (reach[entry] !== REACHABLE && reach[entry] !== ORPHANED) {
    throw new Error(`namespace ${ns.name}: ${key} has no parent but reach ${reach[entry]}`);
  }
  for (let c = firstChild[entry]!; c >= 0; c = nextSibling[c]!) {
    if (!isLive.has(c) || parent[c] !== entry) throw new Error(`namespace ${ns.name}: a child of ${key} (entry ${c}) does not name it`);
  }
}
