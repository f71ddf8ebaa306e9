import { create } from "@bufbuild/protobuf";
import { GetStatsRequestSchema, MetadataService } from "../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { callHeader, LeanTransports } from "../client/lean-transports.js";
import type { ClientTls } from "../client/metadata-client.js";
import { MetadataError, NAMESPACE_COUNTERS, Reason } from "../core/index.js";
import { GrpcUnaryFastPath } from "../framing/grpc/grpc-unary-fast-path.js";
import { HttpBodyReader } from "../framing/http/body-reader.js";
import type { ListenerTls } from "../framing/http/dual-protocol-listener.js";
import type { EarlyPort } from "../framing/http/early-port.js";
import type { Logger } from "../server/logger.js";
import { callCounts } from "../server/metrics.js";
import { requestHandler } from "../server/request-handler.js";
import type { StatusHistory } from "../server/status-history.js";
import type { ShownNamespace } from "../server/status-html.js";
import { listen } from "../server/surface.js";
import type { AccessPolicy } from "../service/access-policy.js";
import { callsService } from "../service/calls-service.js";
import { Edge } from "../service/edge.js";
import { healthService } from "../service/health-service.js";
import { sglangRoutes } from "../service/json/sglang-routes.js";
import { vllmRoutes } from "../service/json/vllm-routes.js";
import { Lifecycle } from "../service/lifecycle.js";
import { RelayMetrics } from "./relay-metrics.js";
import { type RelayOptions, shardGroups, upstreamUrls } from "./relay-options.js";
import { ShardUpstreams } from "./shard-upstreams.js";
import { TopologyFollowing } from "./topology-following.js";
import { Upstream } from "./upstream.js";
import { type ResolveSrv, srvUpstream, UpstreamDiscovery } from "./upstream-discovery.js";

/** SHUTTING_DOWN is the refusal of a call that reaches a relay once it has stopped. */
const SHUTTING_DOWN = new MetadataError(Reason.SHUTTING_DOWN, "the relay is shutting down; retry against the restarted relay");

/** STATUS_STATS_MS bounds the status page's read of the upstream's stats. */
const STATUS_STATS_MS = 2_000;

/** RelayParts are what a relay is built from beyond its options (which relayOptions resolves): its callers' security, and its own upstream's. */
export interface RelayParts {
  /** bound is the port bound already (its owner logged "listening"); undefined: bind the options' port (0: any free one). */
  bound?: EarlyPort;
  /** access decides which of the relay's callers may call (its own --auth-token-file); undefined: every caller. */
  access?: AccessPolicy;
  /** tls serves the relay's callers over TLS; undefined: cleartext. */
  tls?: ListenerTls;
  /** upstreamToken is sent upstream on every call; undefined: none. */
  upstreamToken?: string;
  /** upstreamTls is what the relay trusts and presents upstream. */
  upstreamTls?: ClientTls;
  /** resolveSrv reads an SRV name's records for an --upstream of the SRV form (node:dns's by default; tests give their own). */
  resolveSrv?: ResolveSrv;
  /** upstreamPingMs is how often the calls' connections upstream are PINGed (LeanSession's 5 s; tests set it longer). */
  upstreamPingMs?: number;
  /** upstreamHeldPingMs is how long a call upstream may wait before its connection is PINGed (HeldCalls' 250 ms; tests set it longer). */
  upstreamHeldPingMs?: number;
  /** statusSampleMs is how often the status page's charts take a sample (STATUS_SAMPLE_MS; tests take them faster). */
  statusSampleMs?: number;
}

/** RunningRelay is a relay that listens until closed. */
export interface RunningRelay {
  readonly url: string;
  readonly port: number;
  reloadTls(tls: ListenerTls): void;
  /** close drains: it relays the calls in flight and those that come, keeping the port while any is in flight, then closes it and stops; idempotent. */
  close(): Promise<void>;
}

/**
 * startRelay serves, on one port, the surface of a server (MetadataService
 * over gRPC, gRPC-Web and Connect; the vLLM and SGLang JSON routes, which
 * it translates into MetadataService calls with the server's own
 * translation; health; reflection; its own metrics on GET /metrics) and
 * answers every MetadataService call from its upstream (Upstream): the
 * same answers, errors and server ids as the server's. Its callers' calls
 * pass its own edge (tokens, limits, drain); the upstream does the rest.
 */
export async function startRelay(options: RelayOptions, parts: RelayParts, logger: Logger): Promise<RunningRelay> {
  const lifecycle = new Lifecycle();
  const metrics = new RelayMetrics();
  // Members named by a DNS SRV name: the relay starts on the name itself, which no call reaches, and takes the members as soon as the
  // first read names them (held calls wait within --hold); its start never waits on DNS.
  const srv = srvUpstream(options.upstream);
  // An upstream per shard (its members, ";" between shards) and the router in front of them, then as the cluster's topology says.
  const groups = srv === undefined ? shardGroups(options.upstream) : [`${srv.scheme}://${srv.name}`];
  const shards = new ShardUpstreams(
    groups,
    (urls, shardLocal) =>
      new Upstream({
        urls,
        holdMs: options.holdMs,
        readHoldMs: options.readHoldMs,
        token: parts.upstreamToken,
        tls: parts.upstreamTls,
        metrics,
        logger,
        shardLocal,
        spreadReads: options.reads === "members",
        limits: options,
        pingMs: parts.upstreamPingMs,
        heldPingMs: parts.upstreamHeldPingMs,
      }),
    options.holdMs,
  );
  metrics.reaches = () => shards.caughtUp;
  let seeds: readonly string[] = srv === undefined ? groups.flatMap(upstreamUrls) : [];
  const discovery =
    srv &&
    new UpstreamDiscovery(
      srv,
      (urls) => {
        seeds = urls;
        // A cluster of one shard is the members the name gives; one of more shards, what its topology says (the name then gives seeds).
        if (shards.count === 1) shards.first.setUrls(urls);
      },
      parts.resolveSrv,
    );
  const topologyTransports = new LeanTransports({ tls: parts.upstreamTls, header: callHeader(parts.upstreamToken) });
  const topology = new TopologyFollowing(
    () => seeds,
    topologyTransports,
    (members, limits) => shards.follow(members, limits),
  );
  discovery?.run();
  topology.run();
  const { calls } = shards;
  const edge = new Edge({
    lifecycle,
    observe: metrics.observeCall.bind(metrics),
    ...options,
    reader: new HttpBodyReader(options),
    startupHoldMs: 0, // the upstream holds calls (--hold)
    access: parts.access,
  });
  // The relay's page shows its upstream's namespaces, read through the upstream as any call is, but held only STATUS_STATS_MS:
  // when no server answers by then, the page says so (unreachable, no namespaces) instead of waiting out the hold.
  // The relay charts its own calls (its latency is the upstream's and the hop's; the namespaces' fill is on the servers' pages).
  const status = async (url: string, history: StatusHistory) => {
    const read = create(GetStatsRequestSchema, { allNamespaces: true, pageSize: 100 });
    const stats = await calls("getStats", read, AbortSignal.timeout(STATUS_STATS_MS)).then(
      ({ response }) => response.namespaces,
      () => undefined,
    );
    // The counters are uint64 (bigint) in GetStats: numbers on the page, as a server's own.
    const namespaces = (stats ?? []).map((ns) => ({
      ...ns,
      ...Object.fromEntries(NAMESPACE_COUNTERS.map(({ field }) => [field, Number(ns[field])])),
    })) as unknown as ShownNamespace[];
    const counts = await callCounts(metrics.calls);
    const split = shards.shown();
    return {
      kind: "relay" as const,
      url,
      upstream: options.upstream,
      reachable: stats !== undefined,
      callsGoTo: shards.going(),
      silent: shards.silent(),
      ...(split && { shards: split }),
      namespaces,
      calls: counts,
      history: history.view(),
    };
  };
  const health = healthService(lifecycle, [MetadataService.typeName], undefined, shards);
  const surface = await listen(
    {
      edge,
      metadata: callsService(calls),
      // Plain gRPC skips connect-node's pipeline, as on a server: the relay's own per-call cost is most of a hop's.
      front: (services) => requestHandler(undefined, new GrpcUnaryFastPath(calls, edge, health), services),
      calls,
      routes: [...vllmRoutes({ worldSize: options.vllmWorldSize, namespace: options.vllmNamespace }), ...sglangRoutes],
      redirect: false,
      health,
      metrics: metrics.registry,
      metricsPrefix: "hf3fs_relay",
      sample: async () => ({ calls: await callCounts(metrics.calls), latency: {}, namespaces: [] }),
      statusSampleMs: parts.statusSampleMs,
      status,
      access: parts.access,
      metricsAuth: options.metricsAuth,
      shuttingDown: SHUTTING_DOWN,
    },
    { ...options, port: parts.bound ?? options.port, tls: parts.tls },
    logger,
  );
  const { url, port } = surface;
  let closing: Promise<void> | undefined;
  const close = () =>
    (closing ??= (async () => {
      await surface.close();
      discovery?.stop();
      topology.stop();
      shards.close();
      topologyTransports.close();
    })());
  logger.info({ url, upstream: options.upstream }, parts.bound === undefined ? "listening" : "relaying");
  return { url, port, close, reloadTls: surface.reloadTls };
}
