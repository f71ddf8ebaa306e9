/**
 * NAMESPACE_COUNTERS are the counts kept per namespace, defined once: the
 * field (of GetStats' NamespaceStats, in camelCase), whether it is a gauge
 * (a size of the state) or a counter (events since the process started),
 * its label in the stats table and its help text in /metrics. GetStats,
 * `stats`, `inspect` and /metrics are all derived from this list.
 */
export const NAMESPACE_COUNTERS = [
  { field: "keys", kind: "gauge", label: "keys", help: "Keys confirmed on at least one rank." },
  { field: "completeKeys", kind: "gauge", label: "complete", help: "Keys confirmed on every rank." },
  { field: "evictions", kind: "counter", label: "evictions", help: "Complete keys evicted to make room, since the process started." },
  {
    field: "orphanEvictions",
    kind: "counter",
    label: "evicted orphans",
    help: "Of the evictions, keys without children that no prefix match could reach (a parent was gone), since the process started.",
  },
  {
    field: "leafEvictions",
    kind: "counter",
    label: "evicted leaves",
    help: "Of the evictions, reachable keys that no registered key names as parent, since the process started.",
  },
  {
    field: "lruEvictions",
    kind: "counter",
    label: "evicted lru",
    help: "Of the evictions, keys with children taken in LRU order because no orphan or leaf could go (or every eviction under --eviction lru), since the process started.",
  },
  {
    field: "inlineEvictions",
    kind: "counter",
    label: "evicted inline",
    help: "Of the evictions, those a BatchAllocate made because its rank had no free page (the rest ran ahead of need, past the high watermark), since the process started.",
  },
  { field: "expiredReservations", kind: "counter", label: "expired reservations", help: "Reservations ended by their TTL, since the process started." },
  {
    field: "reclaimedIncompleteKeys",
    kind: "counter",
    label: "reclaimed incomplete",
    help: "Keys reclaimed after the incomplete TTL, since the process started.",
  },
] as const;

type Counter = (typeof NAMESPACE_COUNTERS)[number];

/** NamespaceCounts holds a value for every entry of NAMESPACE_COUNTERS. */
export type NamespaceCounts = Record<Counter["field"], number>;

/** EventCounts are the counters proper (kind "counter"), which the core increments as events happen. */
export type EventCounts = Record<Extract<Counter, { kind: "counter" }>["field"], number>;

/** zeroEventCounts is a fresh set of event counters, all 0. */
export function zeroEventCounts(): EventCounts {
  return Object.fromEntries(NAMESPACE_COUNTERS.filter((c) => c.kind === "counter").map((c) => [c.field, 0])) as EventCounts;
}

/** addCounts adds every counter of `more` into `into` (a namespace's counts over its parts, or many namespaces' in one series). */
export function addCounts(into: NamespaceCounts, more: NamespaceCounts): void {
  for (const field of Object.keys(into) as (keyof NamespaceCounts)[]) into[field] += more[field];
}
