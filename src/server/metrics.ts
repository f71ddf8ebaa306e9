import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client";
import type { MetadataState } from "../core/index.js";
import { NAMESPACE_COUNTERS } from "../core/index.js";
import type { ListenerCounts } from "../framing/http/dual-protocol-listener.js";
import type { MemberRecord } from "../replication/cluster-keys.js";
import type { StandbyReadCounts } from "../replication/standby-reads.js";
import type { LoadShedder } from "../service/load-shedder.js";
import { type Store, withCommit } from "../store/store.js";
import { CallCounter } from "./call-counter.js";

/** ClusterView is what /metrics and `status` show of a highly available cluster. */
export interface ClusterView {
  /** members reads every member's record from etcd. */
  members(): Promise<MemberRecord[]>;
  /** knownMembers reads the lasting record of every member the cluster has known (the status page shows those that are down). */
  knownMembers(): Promise<MemberRecord[]>;
  /** leading is true while this member leads. */
  leading(): boolean;
  /** memberId is this member's id; advertise, the URL the others reach it at (the status page's header). */
  readonly memberId: string;
  readonly advertise: string;
  /** shard is the shard whose cluster this is (0 in a cluster not split): the cluster's series carry it, as each shard has its own log and leader. */
  readonly shard: number;
  /** standbyReads are the reads this member answered as a standby, or passed on (StandbyReads). */
  readonly standbyReads?: { readonly counts: StandbyReadCounts; readonly lagMs: number; staleMs(): number };
}

import { METRICS_LIMITS, type MetricsLimits, metricsSnapshot, type NamespaceSeries, OTHER } from "./metrics-snapshot.js";

/** EVENT_LOOP_SAMPLE_MS is how often prom-client's event-loop lag histogram samples: its default, 10 ms, woke an idle process 100 times a second (bench/README.md). */
const EVENT_LOOP_SAMPLE_MS = 100;

/** CALL_LATENCY_BUCKETS are the buckets of a call's latency, in seconds, a server's and a relay's alike. */
export const CALL_LATENCY_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1];

/** collectProcessMetrics registers prom-client's process and Node metrics (RSS, heap, GC, event-loop lag, open descriptors), a server's or a relay's. */
export function collectProcessMetrics(registry: Registry): void {
  collectDefaultMetrics({ register: registry, eventLoopMonitoringPrecision: EVENT_LOOP_SAMPLE_MS });
}

/**
 * collectListenerMetrics registers what a listener counts, read when
 * scraped, under `prefix` (a server's hf3fs_metadata, a relay's
 * hf3fs_relay): its connections, and the answers it reset unread.
 */
export function collectListenerMetrics(registry: Registry, prefix: string, counts: () => ListenerCounts): void {
  new Counter({
    name: `${prefix}_connections_total`,
    help: "Connections taken since the process started (after TLS, if any).",
    registers: [registry],
    collect() {
      this.reset();
      this.inc(counts().connections);
    },
  });
  new Gauge({
    name: `${prefix}_open_connections`,
    help: "Connections open now.",
    registers: [registry],
    collect() {
      this.set(counts().openConnections);
    },
  });
  new Counter({
    name: `${prefix}_unread_answers_reset_total`,
    help: "HTTP/2 answers reset (CANCEL) because their callers did not take them, by the limit that did it: time (--request-timeout), bytes (--max-unsent-bytes).",
    labelNames: ["limit"],
    registers: [registry],
    collect() {
      this.reset();
      const { time, bytes } = counts().unreadAnswersCancelled;
      this.inc({ limit: "time" }, time);
      this.inc({ limit: "bytes" }, bytes);
    },
  });
}

/**
 * Metrics are the server's Prometheus metrics, in a registry of its own.
 * Per call, only a counter and a histogram of pre-bound children are
 * updated; page and key gauges are computed from the state at scrape time.
 */
export class Metrics {
  readonly registry = new Registry();
  private readonly callCounter = new CallCounter(this.registry, "hf3fs_metadata_calls_total", "Calls by method and status code.");
  readonly calls = this.callCounter.counter;
  private readonly latency = new Histogram({
    name: "hf3fs_metadata_call_duration_seconds",
    help: "Call latency by method, from decoded request to reply (commit included).",
    labelNames: ["method"],
    buckets: CALL_LATENCY_BUCKETS,
    registers: [this.registry],
  });
  private readonly commitSeconds = new Histogram({
    name: "hf3fs_metadata_store_commit_duration_seconds",
    help: "Time from a commit call to its changes being durable.",
    buckets: [0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5],
    registers: [this.registry],
  });
  private readonly commitChanges = new Histogram({
    name: "hf3fs_metadata_store_commit_changes",
    help: "Changes per commit call (one call's changes; calls of one event turn share a transaction).",
    buckets: [1, 2, 4, 8, 16, 64, 256, 1024, 4096, 16384, 65536],
    registers: [this.registry],
  });
  private readonly latencyChildren = new Map<string, { observe(v: number): void }>();
  /** unreached counts the lookups a cluster member answered as misses, knowing no leader for --read-hold (answeringMisses). */
  private readonly unreached = new Counter({
    name: "hf3fs_metadata_unreached_lookups_total",
    help: "BatchExists and GetLocations calls, by method, that this cluster member answered as misses because it had known no leader for --read-hold (hf3fs-unreached).",
    labelNames: ["method"],
    registers: [this.registry],
  });

  /** state gives the state at scrape time (a cluster member gets a new one each time it starts leading); cluster reports the members of a highly available cluster. */
  constructor(state: () => MetadataState, limits: MetricsLimits = METRICS_LIMITS, shedder?: LoadShedder, cluster?: ClusterView) {
    collectProcessMetrics(this.registry);
    new Counter({
      name: "hf3fs_metadata_shed_calls_total",
      help: "Calls refused as overloaded (REASON_OVERLOADED), since the process started.",
      registers: [this.registry],
      collect() {
        this.reset();
        this.inc(shedder?.shedCalls ?? 0);
      },
    });
    // One snapshot per scrape, shared by every collector: prom-client calls them in turn, synchronously.
    let snapshot: NamespaceSeries[] | undefined;
    const namespaces = () => {
      if (snapshot === undefined) {
        snapshot = metricsSnapshot(state(), limits);
        queueMicrotask(() => (snapshot = undefined));
      }
      return snapshot;
    };
    new Gauge({
      name: "hf3fs_metadata_pages",
      help: `Pages by namespace, rank and state (free, reserved, used); namespaces past the first ${limits.namespaces}, or past ${limits.ranks} ranks in all, are summed under namespace and rank "${OTHER}".`,
      labelNames: ["namespace", "rank", "state"],
      registers: [this.registry],
      collect() {
        this.reset();
        for (const ns of namespaces()) {
          for (const r of ns.ranks) {
            const labels = { namespace: ns.namespace, rank: r.rank };
            this.set({ ...labels, state: "free" }, r.free);
            this.set({ ...labels, state: "reserved" }, r.reserved);
            this.set({ ...labels, state: "used" }, r.used);
          }
        }
      },
    });
    if (cluster !== undefined) this.clusterGauges(cluster);
    // Gauges and counters alike are set from the state when scraped: reset, then add each namespace's value.
    for (const { field, kind, help } of NAMESPACE_COUNTERS) {
      const options = {
        name: metricName(field, kind),
        help,
        labelNames: ["namespace"],
        registers: [this.registry],
        collect(this: { reset(): void; inc(labels: { namespace: string }, value: number): void }) {
          this.reset();
          for (const ns of namespaces()) this.inc({ namespace: ns.namespace }, ns.counts[field]);
        },
      };
      if (kind === "gauge") new Gauge(options);
      else new Counter(options);
    }
  }

  /** clusterGauges report each member of the cluster, as etcd holds them, at scrape time. */
  private clusterGauges(cluster: ClusterView): void {
    new Gauge({
      name: "hf3fs_metadata_cluster_member_applied_seq",
      help: "The last log entry each member of this member's shard's cluster applied (each shard has a log of its own), by shard, member id, advertise URL and role (leader or standby).",
      labelNames: ["shard", "member", "url", "role"],
      registers: [this.registry],
      async collect() {
        this.reset();
        const shard = String(cluster.shard);
        for (const m of await cluster.members().catch(() => [])) this.set({ shard, member: m.memberId, url: m.url, role: m.role }, m.appliedSeq);
      },
    });
    const reads = cluster.standbyReads;
    if (reads !== undefined && reads.lagMs > 0) {
      new Counter({
        name: "hf3fs_metadata_standby_reads_total",
        help: "Reads (BatchExists, GetStats) that reached this member as a standby, by outcome: answered here (local), passed to the leader because this member was not known to hold the log's end within --standby-read-lag (lagging), or because it had not applied the position the read needs yet (behind).",
        labelNames: ["outcome"],
        registers: [this.registry],
        collect() {
          this.reset();
          for (const outcome of ["local", "lagging", "behind"] as const) this.inc({ outcome }, reads.counts[outcome]);
        },
      });
      new Gauge({
        name: "hf3fs_metadata_standby_read_staleness_seconds",
        help: "How long ago this standby last knew it held the log's end (it had applied as far as the log's last entry etcd named); it answers reads while this is within --standby-read-lag. 0 while it leads.",
        registers: [this.registry],
        collect() {
          const stale = cluster.leading() ? 0 : reads.staleMs() / 1_000;
          this.set(Number.isFinite(stale) ? stale : -1);
        },
      });
    }
    new Gauge({
      name: "hf3fs_metadata_cluster_leader",
      help: "1 while this member leads its shard's cluster, else 0, by shard.",
      labelNames: ["shard"],
      registers: [this.registry],
      collect() {
        this.set({ shard: String(cluster.shard) }, cluster.leading() ? 1 : 0);
      },
    });
  }

  /** latencyBuckets reads the latency histogram: per method, its buckets' upper bounds (s) and the calls in each or below, since the process started. */
  async latencyBuckets(): Promise<LatencyBuckets> {
    const buckets: LatencyBuckets = {};
    for (const { labels, value, metricName } of (await this.latency.get()).values) {
      if (metricName !== "hf3fs_metadata_call_duration_seconds_bucket") continue;
      const method = String(labels.method);
      const bound = (labels as { le?: string | number }).le;
      const le = bound === "+Inf" ? Number.POSITIVE_INFINITY : Number(bound);
      const list = buckets[method] ?? [];
      buckets[method] = list;
      list.push([le, value]);
    }
    return buckets;
  }

  /** observeCall counts one call of method that ended with code ("ok" or a gRPC code name), and its latency. */
  observeCall(method: string, code: string, seconds: number): void {
    this.countCall(method, code);
    let histogram = this.latencyChildren.get(method);
    if (histogram === undefined) {
      histogram = this.latency.labels({ method });
      this.latencyChildren.set(method, histogram);
    }
    histogram.observe(seconds);
  }

  /** unreachedLookup counts a lookup answered as misses (answeringMisses, --read-hold). */
  unreachedLookup(method: string): void {
    this.unreached.inc({ method });
  }

  /** countCall counts one call of method that ended with code, without a latency of its own (a call of a Batch: the Batch has the latency). */
  countCall(method: string, code: string): void {
    this.callCounter.count(method, code);
  }

  /** instrument wraps a store so that every commit's latency and size are recorded. */
  instrument(store: Store): Store {
    const { commitSeconds, commitChanges } = this;
    return withCommit(store, (changes) => {
      if (changes.length === 0) return store.commit(changes);
      const started = performance.now();
      commitChanges.observe(changes.length);
      const done = store.commit(changes);
      void done.then(
        () => commitSeconds.observe((performance.now() - started) / 1_000),
        () => undefined,
      );
      return done;
    });
  }
}

/** metricName is a namespace counter's metric: "completeKeys" (gauge) is hf3fs_metadata_complete_keys, "evictions" (counter) hf3fs_metadata_evictions_total. */
function metricName(field: string, kind: "gauge" | "counter"): string {
  return `hf3fs_metadata_${field.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)}${kind === "counter" ? "_total" : ""}`;
}

/** LatencyBuckets are a latency histogram's cumulative buckets per method: [upper bound in seconds, calls at or below it]. */
export type LatencyBuckets = Record<string, [number, number][]>;

/** callCounts sums a calls counter (labels method and code) by method: what the status page shows rates of, read when it asks. */
export async function callCounts(counter: Counter<"method" | "code">): Promise<Record<string, number>> {
  const counts: Record<string, number> = {};
  for (const { labels, value } of (await counter.get()).values) counts[String(labels.method)] = (counts[String(labels.method)] ?? 0) + value;
  return counts;
}
