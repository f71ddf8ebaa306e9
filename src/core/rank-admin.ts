import { Role } from "../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { invalidArgument, limitExceeded, MetadataError, Reason } from "./errors.js";
import type { Eviction } from "./eviction.js";
import { KeyScope, rankScopedName } from "./key-scope.js";
import type { Namespace } from "./namespace.js";
import { removeRank } from "./rank-removal.js";
import type { Registry } from "./registry.js";
import { MAX_NUM_PAGES } from "./state-options.js";
import { checkUint32, namespaceName } from "./validate.js";

/**
 * RankDeclaration is what InitializeRank declares beyond the rank's size:
 * the caller's role (a worker unless given), the namespace's KeyScope
 * (keyScope; for a new namespace, newKeyScope when keyScope is not given)
 * and its layout (unset: no check).
 */
export interface RankDeclaration {
  readonly role?: Role;
  readonly keyScope?: KeyScope;
  readonly newKeyScope?: KeyScope;
  readonly layout?: string;
}

/** InitializeRankResult describes a rank after InitializeRank. */
export interface InitializeRankResult {
  created: boolean;
  numPages: number;
  freePages: number;
  /** resizedFrom is the number of pages before this call resized the rank; 0 when it did not. */
  resizedFrom: number;
}

/**
 * initializeRank creates a rank, or checks that it exists with the same
 * parameters. A scheduler keeps no state; any other role (unspecified
 * included) is a worker. The first rank of a namespace fixes its KeyScope
 * (NAMESPACE unless given, by keyScope or for a new namespace newKeyScope).
 */
export function initializeRank(
  registry: Registry,
  namespace: string,
  rankNo: number,
  numPages: number,
  worldSize: number,
  { role = Role.WORKER, keyScope = KeyScope.UNSPECIFIED, newKeyScope = KeyScope.UNSPECIFIED, layout }: RankDeclaration = {},
): InitializeRankResult {
  const name = namespaceName(namespace, registry.options);
  checkUint32(rankNo, "rank");
  checkUint32(worldSize, "world_size");
  registry.expire();
  if (role === Role.SCHEDULER) return { created: false, numPages: 0, freePages: 0, resizedFrom: 0 };
  if (!Number.isInteger(numPages) || numPages < 1 || numPages > MAX_NUM_PAGES) {
    throw invalidArgument("num_pages", `num_pages must be from 1 to ${MAX_NUM_PAGES} for a worker, got ${numPages}`, {
      namespace: name,
      rank: rankNo,
    });
  }
  if (worldSize > 0 && rankNo >= worldSize) {
    throw invalidArgument("rank", `rank ${rankNo} is not below world_size ${worldSize}`, { namespace: name, rank: rankNo });
  }
  if (worldSize > registry.options.maxRanksPerNamespace) {
    throw limitExceeded(
      "world_size",
      `world_size ${worldSize} is more than the limit of ${registry.options.maxRanksPerNamespace} ranks per namespace (--max-ranks-per-namespace)`,
      {
        namespace: name,
        rank: rankNo,
      },
    );
  }
  const current = registry.scopeOf(name);
  if (current !== KeyScope.UNSPECIFIED && keyScope !== KeyScope.UNSPECIFIED && keyScope !== current) {
    throw new MetadataError(
      Reason.RANK_CONFIG_MISMATCH,
      `namespace "${name}" has key scope ${scopeName(current)}, not ${scopeName(keyScope)}${HOW_TO_RESET(name)}`,
      {
        namespace: name,
        rank: rankNo,
        field: "key_scope",
      },
    );
  }
  const perRank = (current !== KeyScope.UNSPECIFIED ? current : keyScope !== KeyScope.UNSPECIFIED ? keyScope : newKeyScope) === KeyScope.RANK;
  // A namespace of KEY_SCOPE_RANK is one namespace per rank inside; its ranks share its world_size and its limits.
  const parts = registry.parts(name);
  const declared = parts[0]?.worldSize;
  if (declared !== undefined && declared !== worldSize) {
    throw new MetadataError(Reason.RANK_CONFIG_MISMATCH, `namespace "${name}" has world_size ${declared}, not ${worldSize}${HOW_TO_RESET(name)}`, {
      namespace: name,
      rank: rankNo,
      field: "world_size",
    });
  }
  const declaredLayout = parts[0]?.layout;
  if (declaredLayout !== undefined && layout !== undefined && layout !== declaredLayout) {
    throw new MetadataError(
      Reason.RANK_CONFIG_MISMATCH,
      `namespace "${name}" holds pages of layout ${JSON.stringify(declaredLayout)}, not ${JSON.stringify(layout)}: its pages are another model's${HOW_TO_RESET(name)}`,
      { namespace: name, rank: rankNo, field: "layout" },
    );
  }
  const found = registry.find(name, rankNo);
  if (found !== undefined) {
    found.ns.lastCallMs = registry.clock();
    const existing = found.rank;
    const was = existing.numPages;
    if (was !== numPages) {
      // The rank's file grew, or shrank: a smaller size needs every page at or above it free.
      const held = existing.resize(numPages);
      if (held >= 0) {
        throw new MetadataError(
          Reason.RANK_CONFIG_MISMATCH,
          `rank ${rankNo} of namespace "${name}" has ${was} pages and cannot shrink to ${numPages}: page ${held} is held${HOW_TO_RESET(name)}`,
          { namespace: name, rank: rankNo, page: held, field: "num_pages" },
        );
      }
      registry.journal.rank(found.ns, rankNo, numPages);
    }
    return { created: false, numPages, freePages: existing.freePages, resizedFrom: was === numPages ? 0 : was };
  }
  if (parts.length === 0 && registry.namespaceCount >= registry.options.maxNamespaces) {
    throw limitExceeded("namespace", `the server has ${registry.namespaceCount} namespaces, the limit (--max-namespaces)`, { namespace: name, rank: rankNo });
  }
  const ranks = parts.reduce((sum, part) => sum + part.ranks.size, 0);
  if (ranks >= registry.options.maxRanksPerNamespace) {
    throw limitExceeded("rank", `namespace "${name}" has ${ranks} ranks, the limit (--max-ranks-per-namespace)`, { namespace: name, rank: rankNo });
  }
  const internal = perRank ? rankScopedName(name, rankNo) : name;
  const ns = perRank ? registry.newNamespace(internal, worldSize) : (parts[0] ?? registry.newNamespace(name, worldSize));
  ns.layout = declaredLayout ?? layout ?? "";
  ns.lastCallMs = registry.clock();
  const rank = ns.addRank(rankNo, numPages);
  registry.journal.rank(ns, rankNo, numPages);
  return { created: true, numPages, freePages: rank.freePages, resizedFrom: 0 };
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
export function dropRank(registry: Registry, eviction: Eviction, namespace: string, rankNo: number): number {
  const name = namespaceName(namespace, registry.options);
  checkUint32(rankNo, "rank");
  registry.expire();
  const { ns, rank } = registry.rankOf(name, rankNo);
  // The namespace's last rank takes the namespace with it: one change, whatever its size.
  if (ns.ranks.size === 1) return forgetNamespace(registry, eviction, ns);
  const subject = { namespace: ns.name, rank: rankNo };
  for (const page of [...rank.reservations]) {
    ns.forgetIfEmpty(rank.releaseReservation(page));
    registry.journal.record({ kind: "unreserve", ...subject, page });
  }
  rank.forgetLapses();
  for (const [page, drain] of [...rank.draining]) {
    rank.endDrain(page, drain.untilMs);
    registry.journal.record({ kind: "undrain", ...subject, page });
  }
  // One change, whatever the namespace holds: a replay and the store apply its effect on the keys themselves.
  registry.journal.record({ kind: "unrank", ...subject });
  const forgotten = removeRank(registry, ns, rank, registry.clock());
  eviction.forget(rank);
  registry.deadlines.armIncomplete(ns);
  return forgotten;
}

/** forgetNamespace drops a namespace whole (Registry.dropNamespace), in a time that grows with its ranks, not its keys; returns how many keys with pages it held. */
function forgetNamespace(registry: Registry, eviction: Eviction, ns: Namespace): number {
  for (const rank of ns.ranks.values()) eviction.forget(rank);
  registry.dropNamespace(ns);
  return ns.confirmedKeys;
}

/**
 * clearNamespace drops every key and reservation of a namespace and keeps
 * its ranks (Clear): it forgets the namespace whole (forgetNamespace) and
 * defines it anew, each rank of the same size, with the pages that must
 * stay held (those of keys under a read lease, and those draining already)
 * draining until the same time. Its cost grows with the ranks and the pages
 * held, not with the keys.
 */
export function clearNamespace(registry: Registry, eviction: Eviction, ns: Namespace): void {
  const now = registry.clock();
  const held: { rank: number; page: number; key: string; untilMs: number }[] = [];
  const leases = ns.columns.leaseUntilMs;
  for (const entry of ns.keys.live()) {
    const untilMs = leases[entry]!;
    if (untilMs <= now || ns.columns.confirmed[entry] === 0) continue;
    for (const rank of ns.ranks.values()) {
      const page = rank.confirmedPage(entry);
      if (page >= 0) held.push({ rank: rank.rank, page, key: ns.keyOf(entry), untilMs });
    }
  }
  for (const rank of ns.ranks.values()) for (const [page, { key, untilMs }] of rank.draining) held.push({ rank: rank.rank, page, key, untilMs });
  forgetNamespace(registry, eviction, ns);
  const fresh = registry.newNamespace(ns.name, ns.worldSize);
  fresh.layout = ns.layout;
  Object.assign(fresh.events, ns.events);
  fresh.lastCallMs = ns.lastCallMs;
  for (const rank of ns.ranks.values()) {
    fresh.addRank(rank.rank, rank.numPages);
    registry.journal.rank(fresh, rank.rank, rank.numPages);
  }
  for (const { rank: rankNo, page, key, untilMs } of held) {
    const rank = fresh.ranks.get(rankNo)!;
    rank.restoreDraining(page, untilMs, key);
    registry.deadlines.drain(fresh, rank, page, untilMs);
    registry.journal.record({ kind: "drain", namespace: fresh.name, rank: rankNo, page, key, untilMs });
  }
}

/** HOW_TO_RESET ends every mismatch error: how an operator defines the namespace anew. */
const HOW_TO_RESET = (name: string) => `; to define it anew, reset it: hf3fs-metadata reset --namespace ${JSON.stringify(name)} (ResetNamespace)`;

/** scopeName names a KeyScope in an error. */
function scopeName(scope: KeyScope): string {
  return scope === KeyScope.RANK ? "RANK (each rank keeps its own keys)" : "NAMESPACE (keys complete on every rank)";
}

/** ResetResult counts what resetNamespace forgot. */
export interface ResetResult {
  namespaces: number;
  ranks: number;
  forgottenKeys: number;
}

/**
 * resetNamespace forgets a namespace whole (undefined: every namespace),
 * each of its parts by one change (forgetNamespace: journaled, so durable
 * and replicated as every change), so that the next InitializeRank
 * defines it anew. Unless forced, it refuses while the namespace is in
 * use (a worker's or a scheduler's call in the last IN_USE_MS), a read
 * lease is live there (a key's, or a deleted key's page held for one), or
 * a page is reserved (a write in flight), changing nothing. `validateOnly`
 * checks so and counts what it would forget, forgetting nothing.
 */
export function resetNamespace(registry: Registry, eviction: Eviction, namespace: string | undefined, force: boolean, validateOnly = false): ResetResult {
  const names = namespace === undefined ? registry.names() : [namespaceName(namespace, registry.options)];
  registry.expire();
  const now = registry.clock();
  if (!force) {
    for (const name of names) {
      const lastCallMs = Math.max(...registry.parts(name).map((ns) => ns.lastCallMs));
      if (now - lastCallMs < IN_USE_MS) {
        throw new MetadataError(
          Reason.NAMESPACE_IN_USE,
          `namespace "${name}" had a call ${((now - lastCallMs) / 1_000).toFixed(1)} s ago: its engines are running, and after a reset their next calls fail with "rank not initialized" (vLLM's client never initializes again). To drop its keys and keep its ranks, clear it: hf3fs-metadata clear --namespace ${JSON.stringify(name)}; to reset it, stop its engines and retry ${IN_USE_MS / 1_000} s after their last call, or reset with force`,
          { namespace: name },
        );
      }
      if (registry.parts(name).some((ns) => leasedNow(ns, now))) {
        throw new MetadataError(
          Reason.READ_LEASED,
          `namespace "${name}" has live read leases: readers may still read its pages; retry after --read-lease-ttl, or reset with force`,
          { namespace: name },
        );
      }
      const writing = registry.parts(name).flatMap((ns) => [...ns.ranks].filter(([, rank]) => rank.reservedPages > 0));
      if (writing.length > 0) {
        const [rankNo, rank] = writing[0]!;
        const where = writing.length === 1 ? `rank ${rankNo}` : `${writing.length} ranks (rank ${rankNo} first)`;
        throw new MetadataError(
          Reason.WRITES_IN_FLIGHT,
          `namespace "${name}" has writes in flight: ${rank.reservedPages} reserved page(s) on ${where}, which a reset would hand to other keys; retry once they are confirmed or expire (--reservation-ttl), or reset with force`,
          { namespace: name, rank: rankNo },
        );
      }
    }
  }
  const result: ResetResult = { namespaces: 0, ranks: 0, forgottenKeys: 0 };
  for (const name of names) {
    const parts = registry.parts(name);
    if (parts.length === 0) continue;
    result.namespaces++;
    for (const ns of parts) {
      result.ranks += ns.ranks.size;
      result.forgottenKeys += validateOnly ? ns.confirmedKeys : forgetNamespace(registry, eviction, ns);
    }
  }
  return result;
}

/** IN_USE_MS is how long after a worker's or a scheduler's call a namespace counts as in use: a reset without force refuses it. */
export const IN_USE_MS = 60_000;

/** leasedNow is true while a read lease is live in a namespace: a key's, or a deleted key's page held for one. */
function leasedNow(ns: Namespace, now: number): boolean {
  for (const rank of ns.ranks.values()) if (rank.draining.size > 0) return true;
  const leases = ns.columns.leaseUntilMs;
  for (const entry of ns.keys.live()) if (leases[entry]! > now) return true;
  return false;
}
