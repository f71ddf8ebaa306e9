import type { NamespaceStatsView } from "../core/index.js";
import type { LatencyBuckets } from "./metrics.js";

/** HistorySample is what the status page charts at one moment: since the sample before, each method's calls/s and p99 latency (ms); now, each rank's fill. */
export interface HistorySample {
  atMs: number;
  callsPerSecond: Record<string, number>;
  p99Ms: Record<string, number>;
  /** fill is each rank's held pages (used and reserved) as a fraction of its pages, by "namespace rank". */
  fill: Record<string, number>;
}

/** Readings are what a sample is taken from: the call counts and the latency histogram since the process started, and the namespaces now. */
export interface Readings {
  calls: Record<string, number>;
  latency: LatencyBuckets;
  namespaces: readonly NamespaceStatsView[];
}

/** STATUS_SAMPLE_MS is how often a server or a relay samples for its status page's charts: 30 samples, the last 5 minutes. */
export const STATUS_SAMPLE_MS = 10_000;

/** HISTORY_RANKS bounds the ranks a sample keeps the fill of (the first, in the namespaces' order). */
const HISTORY_RANKS = 32;

/**
 * StatusHistory keeps the last `size` samples of what the server already
 * measures (its call counter and latency histogram, its namespaces), for
 * the status page's charts. Each sample is the difference from the
 * readings before it, so it costs what the methods and ranks are, not the
 * calls.
 */
export class StatusHistory {
  private readonly kept: HistorySample[] = [];
  private previous: { atMs: number; calls: Record<string, number>; latency: LatencyBuckets } | undefined;

  constructor(
    /** everyMs is how often a sample is taken (the caller's timer). */
    readonly everyMs: number,
    private readonly size = 30,
  ) {}

  /** samples are the samples kept, oldest first. */
  get samples(): readonly HistorySample[] {
    return this.kept;
  }

  /** view is what the status page charts: the samples and how far apart they are. */
  view(): { everyMs: number; samples: readonly HistorySample[] } {
    return { everyMs: this.everyMs, samples: this.kept };
  }

  /** run takes readings now and every everyMs (a sample each, one at a time) until the returned stop; its timer keeps no process alive. */
  run(read: () => Promise<Readings>): () => void {
    let busy = false;
    const take = () => {
      if (busy) return;
      busy = true;
      read()
        .then((readings) => this.add(Date.now(), readings))
        .catch(() => undefined)
        .finally(() => (busy = false));
    };
    take();
    const timer = setInterval(take, this.everyMs);
    timer.unref();
    return () => clearInterval(timer);
  }

  /** add takes a sample from readings at atMs; the first readings only start the differences. */
  add(atMs: number, { calls, latency, namespaces }: Readings): void {
    const before = this.previous;
    this.previous = { atMs, calls, latency };
    if (before === undefined) return;
    const seconds = Math.max(atMs - before.atMs, 1) / 1_000;
    const callsPerSecond: Record<string, number> = {};
    for (const [method, count] of Object.entries(calls)) callsPerSecond[method] = (count - (before.calls[method] ?? 0)) / seconds;
    const p99Ms: Record<string, number> = {};
    for (const [method, buckets] of Object.entries(latency)) {
      const p99 = percentile(buckets, before.latency[method] ?? [], 0.99);
      if (p99 !== undefined) p99Ms[method] = p99 * 1_000;
    }
    const fill: Record<string, number> = {};
    for (const ns of namespaces) {
      for (const rank of ns.ranks) {
        if (Object.keys(fill).length >= HISTORY_RANKS) break;
        fill[`${ns.namespace} ${rank.rank}`] = (rank.usedPages + rank.reservedPages) / rank.numPages;
      }
    }
    this.kept.push({ atMs, callsPerSecond, p99Ms, fill });
    if (this.kept.length > this.size) this.kept.shift();
  }
}

/**
 * percentile is the upper bound of the bucket that holds quantile q of the
 * calls between two readings of cumulative buckets; undefined when no call
 * was made between them. A quantile past the last finite bound is that bound.
 */
export function percentile(now: readonly [number, number][], before: readonly [number, number][], q: number): number | undefined {
  const at = new Map(before);
  const counts = now.map(([le, count]) => [le, count - (at.get(le) ?? 0)] as const);
  const total = counts.at(-1)?.[1] ?? 0;
  if (total <= 0) return undefined;
  let lastFinite = 0;
  for (const [le, count] of counts) {
    if (Number.isFinite(le)) lastFinite = le;
    if (count >= q * total) return Number.isFinite(le) ? le : lastFinite;
  }
  return lastFinite;
}
