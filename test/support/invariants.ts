import { confirmedPage, confirmedRanks, type KeyRecord, type Reservation } from "../../src/core/key-record.js";
import type { MetadataState } from "../../src/core/state.js";

/**
 * assertInvariants walks every page of every rank and throws on the first
 * broken invariant: each page in exactly one state, counts adding up, no page
 * held by two keys, the registry matching the ranks.
 */
export function assertInvariants(state: MetadataState): void {
  for (const ns of state.namespaceViews.values()) {
    const confirmations = new Map<string, number>();
    for (const rank of ns.ranks.values()) {
      const where = `namespace ${ns.name} rank ${rank.rank}`;
      // Pages never handed out are free by construction; walking them would take minutes on a rank of 2^31 pages.
      let free = rank.numPages - rank.pool.handedOut;
      let reserved = 0;
      let used = 0;
      for (let page = 0; page < rank.pool.handedOut; page++) {
        const state = rank.pageState(page);
        if (state === "free") free++;
        else if (state === "reserved") reserved++;
        else used++;
      }
      if (free + reserved + used !== rank.numPages) throw new Error(`${where}: states do not add up`);
      if (free !== rank.pool.freePages) throw new Error(`${where}: ${free} free pages, pool says ${rank.pool.freePages}`);
      if (reserved !== rank.reservedPages) throw new Error(`${where}: ${reserved} reserved pages, map says ${rank.reservedPages}`);
      if (used !== rank.usedPages) throw new Error(`${where}: ${used} used pages, counters say ${rank.usedPages}`);
      const pagesSeen = new Set<number>();
      let lastExpiry = -Infinity;
      for (const reservation of rank.reservations) {
        const key = ns.keyOf(reservation.record);
        if (reservation.slot !== rank.slot) throw new Error(`${where}: reservation of ${key} for slot ${reservation.slot} on slot ${rank.slot}`);
        if (ns.lookup(key) !== reservation.record) throw new Error(`${where}: reservation of ${key}, whose record is not registered`);
        if (!chain(reservation.record).includes(reservation)) throw new Error(`${where}: reservation of ${key} missing from its record`);
        if (rank.pool.ownerOf(reservation.page) !== reservation.record) throw new Error(`${where}: reserved page ${reservation.page} not owned by ${key}`);
        if (reservation.expiresAtMs < lastExpiry) throw new Error(`${where}: reservations out of expiry order`);
        lastExpiry = reservation.expiresAtMs;
        pagesSeen.add(reservation.page);
      }
      for (const record of ns.keys.values()) {
        const key = ns.keyOf(record);
        const atSlot = chain(record).filter((r) => r.slot === rank.slot);
        if (atSlot.length > 1) throw new Error(`${where}: ${key} has ${atSlot.length} reservations`);
        if (atSlot.length === 1 && !rank.reservations.has(atSlot[0]!)) throw new Error(`${where}: reservation of ${key} not in the rank's order`);
        const page = confirmedPage(record, rank.slot);
        if (page < 0) continue;
        if (rank.pool.ownerOf(page) !== record) throw new Error(`${where}: used page ${page} not owned by ${key}`);
        if (atSlot.length > 0) throw new Error(`${where}: ${key} both reserved and used`);
        if (pagesSeen.has(page)) throw new Error(`${where}: page ${page} held twice`);
        pagesSeen.add(page);
        confirmations.set(key, (confirmations.get(key) ?? 0) + 1);
      }
      for (const [page] of rank.draining) {
        if (rank.pool.ownerOf(page) === undefined) throw new Error(`${where}: draining page ${page} is free`);
        if (pagesSeen.has(page)) throw new Error(`${where}: draining page ${page} also reserved or used`);
        pagesSeen.add(page);
      }
      if (pagesSeen.size !== rank.pool.heldPages)
        throw new Error(`${where}: ${rank.pool.heldPages} held pages but ${pagesSeen.size} reserved, used or draining`);
      for (const [page, key] of rank.lapsed) {
        if (rank.pool.ownerOf(page) !== undefined) throw new Error(`${where}: lapsed page ${page} of ${key} is not free`);
      }
    }
    if (confirmations.size !== ns.confirmedKeys)
      throw new Error(`namespace ${ns.name}: ${ns.confirmedKeys} confirmed records for ${confirmations.size} confirmed keys`);
    let registered = 0;
    for (const record of ns.keys.values()) {
      const key = ns.keyOf(record);
      registered++;
      if (ns.lookup(key) !== record) throw new Error(`namespace ${ns.name}: ${key} is not found under its key`);
      if (record.pages.length === 0 && record.firstReservation === undefined) throw new Error(`namespace ${ns.name}: ${key} holds nothing but is registered`);
      if (record.pages.length === 0) {
        if (record.complete || record.list !== undefined) throw new Error(`namespace ${ns.name}: ${key} has no page but is complete or listed`);
        continue;
      }
      if (confirmedRanks(record) !== confirmations.get(key))
        throw new Error(`namespace ${ns.name}: ${key} counts ${confirmedRanks(record)} ranks, has ${confirmations.get(key)}`);
      if (record.complete !== ns.lru.has(record)) throw new Error(`namespace ${ns.name}: ${key} complete=${record.complete} but lru disagrees`);
      if (record.complete === ns.incomplete.has(record))
        throw new Error(`namespace ${ns.name}: ${key} complete=${record.complete} but the incomplete list disagrees`);
    }
    if (registered !== ns.keys.size) throw new Error(`namespace ${ns.name}: the registry counts ${ns.keys.size} keys, holds ${registered}`);
    if (ns.lru.size !== [...ns.keys.values()].filter((r) => r.complete).length) throw new Error(`namespace ${ns.name}: lru holds unknown records`);
  }
}

/** chain lists a record's reservations. */
function chain(record: KeyRecord): Reservation[] {
  const all: Reservation[] = [];
  for (let r = record.firstReservation; r !== undefined; r = r.nextOfKey) all.push(r);
  return all;
}
