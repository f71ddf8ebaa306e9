import type { Namespace } from "./namespace.js";
import type { NamespaceCounts } from "./namespace-counters.js";

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

/**
 * statsPage reports at most `size` namespaces, by name, from the first
 * after `after` ("" for the first), and the name to ask for the next page
 * after ("" when none is left): an answer stays bounded however many
 * namespaces and ranks there are.
 */
export function statsPage(namespaces: ReadonlyMap<string, Namespace>, after: string, size: number): { views: NamespaceStatsView[]; next: string } {
  const names = [...namespaces.keys()].filter((name) => name > after).sort();
  const page = names.slice(0, size);
  const next = names.length > page.length ? page[page.length - 1]! : "";
  return { views: page.map((name) => statsOf(namespaces.get(name)!)), next };
}

/** statsOf reports a namespace's ranks, by number, and its counts. */
export function statsOf(ns: Namespace): NamespaceStatsView {
  const ranks = [...ns.ranks.values()]
    .sort((a, b) => a.rank - b.rank)
    .map((rank) => ({ rank: rank.rank, numPages: rank.numPages, freePages: rank.freePages, reservedPages: rank.reservedPages, usedPages: rank.usedPages }));
  return { namespace: ns.name, worldSize: ns.worldSize, ranks, ...ns.counts() };
}
