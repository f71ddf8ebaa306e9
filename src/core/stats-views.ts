import { KeyScope } from "./key-scope.js";
import type { Namespace } from "./namespace.js";
import { addCounts, type NamespaceCounts } from "./namespace-counters.js";
import type { Registry } from "./registry.js";

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
  keyScope: KeyScope;
  /** layout is what the namespace's pages hold, as its first rank declared it; "" for none. */
  layout: string;
  ranks: RankStatsView[];
}

/**
 * statsPage reports at most `size` namespaces, by name, from the first
 * after `after` ("" for the first), and the name to ask for the next page
 * after ("" when none is left): an answer stays bounded however many
 * namespaces and ranks there are.
 */
export function statsPage(registry: Registry, after: string, size: number): { views: NamespaceStatsView[]; next: string } {
  const names = registry
    .names()
    .filter((name) => name > after)
    .sort();
  const page = names.slice(0, size);
  const next = names.length > page.length ? page[page.length - 1]! : "";
  return { views: page.map((name) => statsOf(registry.parts(name))), next };
}

/** statsOf reports a namespace (all its parts: one per rank with KEY_SCOPE_RANK): its ranks, by number, and its counts summed. */
export function statsOf(parts: readonly Namespace[]): NamespaceStatsView {
  const first = parts[0]!;
  const ranks = parts
    .flatMap((ns) => [...ns.ranks.values()])
    .sort((a, b) => a.rank - b.rank)
    .map((rank) => ({ rank: rank.rank, numPages: rank.numPages, freePages: rank.freePages, reservedPages: rank.reservedPages, usedPages: rank.usedPages }));
  const counts = first.counts();
  for (const ns of parts.slice(1)) addCounts(counts, ns.counts());
  const keyScope = first.scopedRank === undefined ? KeyScope.NAMESPACE : KeyScope.RANK;
  return { namespace: first.label, worldSize: first.worldSize, keyScope, layout: first.layout, ranks, ...counts };
}

/**
 * statsInOrder reports every namespace in the order they were made, each
 * once (the parts of a namespace of KEY_SCOPE_RANK with its first), as it
 * stands: it processes nothing that is due, so that what reads it (a
 * scrape, the status page) changes nothing (a change is shown once
 * durable, and only a call or the expiry commits one).
 */
export function statsInOrder(namespaces: Iterable<Namespace>, registry: Registry): NamespaceStatsView[] {
  const named = new Set<string>();
  const views: NamespaceStatsView[] = [];
  for (const ns of namespaces) {
    if (named.has(ns.label)) continue;
    named.add(ns.label);
    views.push(statsOf(registry.parts(ns.label)));
  }
  return views;
}
