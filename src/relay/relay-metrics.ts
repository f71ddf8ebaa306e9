import { Counter, Gauge, Histogram, Registry } from "prom-client";
import { CallCounter } from "../server/call-counter.js";
import { CALL_LATENCY_BUCKETS, collectProcessMetrics } from "../server/metrics.js";

/** RelayMetrics are a relay's Prometheus metrics, in a registry of its own (GET /metrics on the relay). */
export class RelayMetrics {
  readonly registry = new Registry();
  private readonly callCounter = new CallCounter(this.registry, "hf3fs_relay_calls_total", "Calls by method (or JSON route) and status code.");
  readonly calls = this.callCounter.counter;
  private readonly latency = new Histogram({
    name: "hf3fs_relay_call_duration_seconds",
    help: "Call latency at the relay by method, from the request's arrival to its reply (holds included).",
    labelNames: ["method"],
    buckets: CALL_LATENCY_BUCKETS,
    registers: [this.registry],
  });
  private readonly upstream = new Histogram({
    name: "hf3fs_relay_upstream_duration_seconds",
    help: "Time from sending a call upstream to its answer, by method (retries and holds included).",
    labelNames: ["method"],
    buckets: CALL_LATENCY_BUCKETS,
    registers: [this.registry],
  });
  private readonly retries = new Counter({
    name: "hf3fs_relay_upstream_retries_total",
    help: "Calls sent upstream again: after a broken connection, an UNAVAILABLE answer, or to the leader a standby named.",
    registers: [this.registry],
  });
  private readonly changes = new Counter({
    name: "hf3fs_relay_upstream_changes_total",
    help: "Times the relay moved its calls to another upstream server (a new leader, or the next member after a failure).",
    registers: [this.registry],
  });
  private readonly held = new Histogram({
    name: "hf3fs_relay_held_seconds",
    help: "Calls the relay held through a failure upstream (at least one retry), by how long they were held.",
    buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 3, 5, 10, 30, 60],
    registers: [this.registry],
  });
  private readonly batches = new Histogram({
    name: "hf3fs_relay_batch_calls",
    help: "Batches the relay sent upstream, by the calls each gathered (its callers' calls, or their parts for one shard, that came in one turn of the event loop, or while two were on their way there).",
    buckets: [2, 4, 8, 16, 32, 64],
    registers: [this.registry],
  });
  private readonly unreached = new Counter({
    name: "hf3fs_relay_unreached_lookups_total",
    help: "BatchExists and GetLocations calls (or a shard's part of one), by method, answered as misses because no server had answered calls for --read-hold (hf3fs-unreached).",
    labelNames: ["method"],
    registers: [this.registry],
  });
  /** reaches says whether the relay reaches, in every shard, a server that answers calls (ShardUpstreams.caughtUp); read when scraped. */
  reaches: () => boolean = () => false;

  constructor() {
    collectProcessMetrics(this.registry);
    const reaches = () => this.reaches();
    new Gauge({
      name: "hf3fs_relay_upstream_reachable",
      help: "1 while the relay reaches a server that answers calls (a single server, or a cluster's leader) in every shard, else 0.",
      registers: [this.registry],
      collect() {
        this.set(reaches() ? 1 : 0);
      },
    });
  }

  /** observeCall counts one call at the relay that ended with code ("ok" or a gRPC code name), and its latency. */
  observeCall(method: string, code: string, seconds: number): void {
    this.callCounter.count(method, code);
    this.latency.observe({ method }, seconds);
  }

  /** observeUpstream records one call's time upstream, and how long it was held when it needed retries. */
  observeUpstream(method: string, seconds: number, retried: boolean): void {
    this.upstream.observe({ method }, seconds);
    if (retried) this.held.observe(seconds);
  }

  /** retried counts a call sent upstream again. */
  retried(): void {
    this.retries.inc();
  }

  /** moved counts a change of the upstream server calls go to. */
  moved(): void {
    this.changes.inc();
  }

  /** unreachedRead counts a lookup answered as misses (Upstream, --read-hold). */
  unreachedRead(method: string): void {
    this.unreached.inc({ method });
  }

  /** gathered records a Batch sent upstream with `calls` calls. */
  gathered(calls: number): void {
    this.batches.observe(calls);
  }
}
