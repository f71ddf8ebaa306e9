import type { Change, ParentName } from "./change.js";
import type { Namespace } from "./namespace.js";
import { removeRank } from "./rank-removal.js";
import type { Registry } from "./registry.js";

/** Restoring is a restore a change at a time (MetadataState.restoring). */
export interface Restoring {
  /** add applies one stored change, in restore's order. */
  add(change: Change): void;
  /** link links at most `max` keys stored before their parents; true once all are. */
  link(max: number): boolean;
  /** finish arms the deadlines: the state can serve. */
  finish(): void;
}

/** RestartTerms are what a state grants as it starts to serve after a restart or a takeover (restartTerms). */
interface RestartTerms {
  nowMs: number;
  leaseUntilMs: number;
  reclaimAtMs: number;
}

/** PendingParents are the keys restored before their parents, with the parents' names, to link once all keys are in (restoring). */
interface PendingParents {
  namespaces: Namespace[];
  entries: number[];
  names: string[];
}

/**
 * restoring rebuilds an empty registry from stored state, and grants the
 * restart terms (restartTerms). The stored changes come "rank" first, then
 * "key", "reserve" and "drain" in any order; keys stored before their
 * parents are linked after, a batch at a time.
 */
export function restoring(registry: Registry): Restoring {
  const terms = restartTerms(registry);
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
    add: (change) => restoreOne(registry, change, terms, pending),
    link,
    finish: () => {
      link(Number.POSITIVE_INFINITY);
      for (const ns of registry.namespaces.values()) {
        for (const rank of ns.ranks.values()) {
          rank.sortReservations();
          registry.deadlines.armReservations(ns, rank);
        }
        registry.deadlines.armIncomplete(ns);
      }
    },
  };
}

/**
 * replayOne applies one change of the leader's journal to a registry kept
 * equal to what restoring the store would give (a key record replaces the
 * key's confirmed pages whole, as the store replaces it). The restart
 * terms come at takeOver.
 */
export function replayOne(registry: Registry, change: Change): void {
  switch (change.kind) {
    case "rank": {
      // A rank's change again is its new size (InitializeRank resized it; the leader found the pages free).
      const rank = registry.namespaces.get(change.namespace)?.ranks.get(change.rank);
      if (rank === undefined) restoreOne(registry, change, undefined);
      else if (rank.numPages !== change.numPages && rank.resize(change.numPages) >= 0)
        throw new Error(`replay cannot resize rank ${change.rank} of "${change.namespace}"`);
      return;
    }
    case "unrank": {
      const ns = registry.namespaces.get(change.namespace);
      const rank = ns?.ranks.get(change.rank);
      if (ns === undefined || rank === undefined) return;
      removeRank(registry, ns, rank, registry.clock());
      if (ns.ranks.size === 0) registry.deleteNamespace(ns);
      return;
    }
    case "reserve": {
      const { ns, rank } = registry.rankOf(change.namespace, change.rank);
      const holder = rank.reservedBy(change.page);
      // A renewal comes as the same reservation again (the same expiry: its parent was journaled anew, Journal.orphan).
      if (holder < 0 || holder !== ns.entryOf(change.key)) restoreOne(registry, change, undefined);
      else if (rank.expiresAtMs(change.page) !== change.expiresAtMs) rank.renew(change.page, change.expiresAtMs);
      return;
    }
    case "unreserve": {
      const { ns, rank } = registry.rankOf(change.namespace, change.rank);
      if (rank.reservedBy(change.page) < 0) return;
      const entry = rank.releaseReservation(change.page);
      // A confirmation's key record follows: forgetting the key in between would cut it from its children.
      if (!change.confirmed) ns.forgetIfEmpty(entry);
      return;
    }
    case "key":
    case "forget": {
      const ns = registry.namespaces.get(change.namespace);
      if (ns === undefined) throw new Error(`replayed key "${change.key}" of unknown namespace "${change.namespace}"`);
      const entry = ns.entryOf(change.key);
      registry.unconfirm(ns, entry);
      if (change.kind === "key") restoreOne(registry, change, undefined);
      else ns.forgetIfEmpty(entry);
      return;
    }
    case "drain":
      restoreOne(registry, change, undefined);
      return;
    case "undrain": {
      const { rank } = registry.rankOf(change.namespace, change.rank);
      const drain = rank.draining.get(change.page);
      if (drain !== undefined) rank.endDrain(change.page, drain.untilMs);
      return;
    }
    case "drop": {
      const ns = registry.namespaces.get(change.namespace);
      if (ns !== undefined) registry.deleteNamespace(ns);
      return;
    }
  }
}

/** takeOver readies a replayed registry to serve (replayOne): the restart terms, then the deadlines. */
export function takeOver(registry: Registry): void {
  const terms = restartTerms(registry);
  for (const ns of registry.namespaces.values()) {
    for (const entry of ns.keys.live()) if (ns.columns.confirmed[entry]! > 0) grantRestartTerms(ns, entry, terms);
    for (const rank of ns.ranks.values()) {
      for (const [page, drain] of rank.draining) {
        const held = drainedUntil(drain.untilMs, terms);
        if (held === drain.untilMs) continue;
        rank.holdDrain(page, held);
        registry.deadlines.drain(ns, rank, page, held);
      }
      rank.sortReservations();
      registry.deadlines.armReservations(ns, rank);
    }
    registry.deadlines.armIncomplete(ns);
  }
}

/**
 * restartTerms: read leases are not stored, so a state that starts to
 * serve after a restart or a takeover grants every key with pages a read
 * lease of readLeaseTtlMs, for one TTL no key is evicted and no deleted
 * key's page is freed (draining pages are held at least as long), and
 * every incomplete key a fresh incomplete TTL.
 */
function restartTerms(registry: Registry): RestartTerms {
  const now = registry.clock();
  return { nowMs: now, leaseUntilMs: now + registry.options.readLeaseTtlMs, reclaimAtMs: now + registry.options.incompleteTtlMs };
}

/**
 * restoreOne applies one stored change; with the restore's terms
 * (restartTerms) and the parents it has yet to find, or without them when
 * the takeover grants them later (replayOne: the leader's log registers a
 * parent before its children).
 */
function restoreOne(registry: Registry, change: Change, terms: RestartTerms | undefined, pending?: PendingParents): void {
  switch (change.kind) {
    case "rank": {
      const ns = registry.namespaces.get(change.namespace) ?? registry.newNamespace(change.namespace, change.worldSize);
      ns.layout = change.layout ?? "";
      ns.addRank(change.rank, change.numPages);
      break;
    }
    case "key": {
      const ns = registry.namespaces.get(change.namespace);
      if (ns === undefined) throw new Error(`stored key "${change.key}" of unknown namespace "${change.namespace}"`);
      const entry = ns.entryOf(change.key);
      restoreParent(ns, entry, change.parent, pending);
      const pages = change.pages;
      for (let i = 0; i < pages.length; i += 2) registry.rankOf(change.namespace, pages[i]!).rank.restoreUsed(entry, pages[i + 1]!);
      ns.restoreConfirmed(entry, change.complete, registry.clock());
      if (terms !== undefined) grantRestartTerms(ns, entry, terms);
      break;
    }
    case "reserve": {
      const { ns, rank } = registry.rankOf(change.namespace, change.rank);
      const entry = ns.entryOf(change.key);
      restoreParent(ns, entry, change.parent, pending);
      rank.restoreReservation(entry, change.page, change.expiresAtMs);
      break;
    }
    case "drain": {
      const { ns, rank } = registry.rankOf(change.namespace, change.rank);
      const untilMs = terms === undefined ? change.untilMs : drainedUntil(change.untilMs, terms);
      // The page's holder is the deleted key, not whatever entry has its name now.
      rank.restoreDraining(change.page, untilMs, change.key);
      registry.deadlines.drain(ns, rank, change.page, untilMs);
      break;
    }
    case "unrank":
    case "unreserve":
    case "undrain":
    case "forget":
    case "drop":
      break;
  }
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

/** grantRestartTerms gives a key with pages its read lease and, if it is incomplete, its reclaim deadline after a restart (restartTerms). */
function grantRestartTerms(ns: Namespace, entry: number, terms: RestartTerms): void {
  ns.grantRestart(entry, terms.leaseUntilMs, terms.reclaimAtMs, terms.nowMs);
}

/** drainedUntil is how long a stored draining page is held after a restart: at least the restart's read lease (restartTerms). */
function drainedUntil(untilMs: number, terms: RestartTerms): number {
  return Math.max(untilMs, terms.leaseUntilMs);
}
