import type { MetadataState, NamespaceStatsView } from "../core/index.js";
import { addCounts, NAMESPACE_COUNTERS, type NamespaceCounts } from "../core/index.js";

/** OTHER is the namespace label of the namespaces summed together, and the rank label of their ranks. */
export const OTHER = "_other";

/** MetricsLimits bound the series of a scrape: namespaces reported each, and ranks reported each. */
export interface MetricsLimits {
  namespaces: number;
  ranks: number;
}

/** METRICS_LIMITS are the limits of /metrics. */
export const METRICS_LIMITS: MetricsLimits = { namespaces: 100, ranks: 4_096 };

/** RankPages counts the pages of a rank, or of the ranks summed under OTHER. */
export interface RankPages {
  rank: string;
  free: number;
  reserved: number;
  used: number;
}

/** NamespaceSeries is what /metrics reports of a namespace, or of the namespaces summed under OTHER. */
export interface NamespaceSeries {
  namespace: string;
  counts: NamespaceCounts;
  ranks: RankPages[];
}

/**
 * metricsSnapshot reads the state for one scrape in one pass, its size
 * bounded whatever the number of namespaces and ranks: namespaces in
 * creation order are reported each while they are within
 * `limits.namespaces` and their ranks within `limits.ranks` in all; every
 * other namespace is added into one OTHER series, its pages into one
 * OTHER rank. It only reads: what is due is processed by the server's
 * expiry, at least every second, not by a scrape.
 */
export function metricsSnapshot(state: MetadataState, limits: MetricsLimits = METRICS_LIMITS): NamespaceSeries[] {
  const series: NamespaceSeries[] = [];
  let other: NamespaceSeries | undefined;
  let ranksLeft = limits.ranks;
  for (const view of state.peekStats()) {
    const counts = countsOf(view);
    if (series.length < limits.namespaces && view.ranks.length <= ranksLeft) {
      ranksLeft -= view.ranks.length;
      const ranks = view.ranks.map((r) => ({ rank: String(r.rank), free: r.freePages, reserved: r.reservedPages, used: r.usedPages }));
      series.push({ namespace: view.namespace, counts, ranks });
      continue;
    }
    other ??= { namespace: OTHER, counts: zeroCounts(counts), ranks: [{ rank: OTHER, free: 0, reserved: 0, used: 0 }] };
    addCounts(other.counts, counts);
    const pages = other.ranks[0]!;
    for (const r of view.ranks) {
      pages.free += r.freePages;
      pages.reserved += r.reservedPages;
      pages.used += r.usedPages;
    }
  }
  if (other !== undefined) series.push(other);
  return series;
}

/** countsOf is a namespace's NAMESPACE_COUNTERS, from its stats. */
function countsOf(view: NamespaceStatsView): NamespaceCounts {
  return Object.fromEntries(NAMESPACE_COUNTERS.map(({ field }) => [field, view[field]])) as NamespaceCounts;
}

function zeroCounts(like: NamespaceCounts): NamespaceCounts {
  return Object.fromEntries(Object.keys(like).map((field) => [field, 0])) as NamespaceCounts;
}
