import { ReplicationService } from "../../gen/hf3fs/metadata/internal/v1/replication_pb.js";
import { MetadataService } from "../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { MetadataError, Reason } from "../core/index.js";
import { GrpcUnaryFastPath } from "../framing/grpc/grpc-unary-fast-path.js";
import { HttpBodyReader } from "../framing/http/body-reader.js";
import type { ListenerTls } from "../framing/http/dual-protocol-listener.js";
import type { EarlyPort } from "../framing/http/early-port.js";
import { callNameOf, methodOfCall } from "../framing/json/json-router.js";
import { ENVELOPE_BYTES } from "../protocol/envelope.js";
import type { PeerTls } from "../protocol/peer-tls.js";
import { type ReplicationSource, replicationService } from "../replication/replication-service.js";
import type { AccessPolicy } from "../service/access-policy.js";
import { BackgroundEviction } from "../service/background-eviction.js";
import type { CallHeard } from "../service/batch-calls.js";
import { singleNodeTopology, type Topology, withLimits } from "../service/cluster-service.js";
import { Edge } from "../service/edge.js";
import { healthService } from "../service/health-service.js";
import { sglangRoutes } from "../service/json/sglang-routes.js";
import { vllmRoutes } from "../service/json/vllm-routes.js";
import type { Leadership } from "../service/leadership.js";
import { commit, type Ledger } from "../service/ledger.js";
import { Lifecycle } from "../service/lifecycle.js";
import { type LagSampler, LoadShedder, loopLagSampler } from "../service/load-shedder.js";
import { answeringMisses, callsAnsweringMisses, LOOKUPS, type Lookup, leaderlessGate } from "../service/lookup-misses.js";
import { type MetadataCalls, type MethodName, READS } from "../service/metadata-calls.js";
import { localCalls, metadataService, routedService } from "../service/metadata-service.js";
import { shardCalls, shardRouter } from "../service/shard-router.js";
import type { CurrentLoad } from "../store/load-progress.js";
import { LeaderForward } from "./leader-forward.js";
import type { Logger } from "./logger.js";
import { type ClusterView, callCounts, Metrics } from "./metrics.js";
import { RefusalLog } from "./refusal-log.js";
import { requestHandler } from "./request-handler.js";
import type { ServerOptions } from "./server-options.js";
import type { ShardRead } from "./shard-peers.js";
import { serverStatus, shownShards, statusNamespaces } from "./status-view.js";
import { listen } from "./surface.js";

/**
 * ServerParts are what a server is built from beyond its options (which
 * serverOptions resolves): what the serve command read and built.
 */
export interface ServerParts {
  /** bound is the port bound already (its owner logged "listening"); undefined: bind the options' port (0: any free one). */
  bound?: EarlyPort;
  /** access decides which calls may run (token files); undefined: every call. */
  access?: AccessPolicy;
  /** peerTls is how a standby reaches its leader over TLS to forward calls (a cluster member with tls). */
  peerTls?: PeerTls;
  /** tls serves every protocol over TLS with this certificate (and requires client certificates signed by its clientCa); undefined: cleartext. */
  tls?: ListenerTls;
  /** sampleLag replaces the event-loop lag measurement (tests). */
  sampleLag?: LagSampler;
  /** expireIntervalMs is how often due deadlines are processed without traffic. Defaults to 1 s. */
  expireIntervalMs?: number;
  /** leadership, in a highly available cluster, admits MetadataService calls only while this member leads; undefined: single-node. */
  leadership?: Leadership;
  /** position is the log position this member's answers reflect (LOG_POSITION): the leader's last append, a standby's last applied entry; undefined: single-node. */
  position?: () => number;
  /** cluster reports the cluster's members on /metrics, and serves them snapshots; undefined: single-node. */
  cluster?: ClusterView & ReplicationSource;
  /**
   * starting: the server listens before its state is loaded; calls wait
   * (at most startupHoldMs) until its owner calls `lifecycle.started()`, or
   * fail with the refusal it gives `lifecycle.refuse()` if loading failed.
   */
  starting?: boolean;
  /** loads is the long load the server runs now (its store; a member's standby state or snapshot), shown on the status page. */
  loads?: CurrentLoad;
  /** statusSampleMs is how often the status page's charts take a sample (STATUS_SAMPLE_MS; tests take them faster). */
  statusSampleMs?: number;
  /**
   * peers are a member's view of its cluster's shards (shard-peers.ts):
   * the topology it answers and, in a cluster split into shards (the
   * options' --shards), the other shards' leaders, where calls' keys of
   * other shards go. Undefined: a single node, its shard's one member.
   */
  peers?: Peers;
}

/** Peers are a member's view of its cluster's shards and its ways to the other shards' leaders, closed with the server. */
export interface Peers {
  calls(shard: number): MetadataCalls;
  topology(): Topology | Promise<Topology>;
  /** shardMembers reads each shard's members for the status page (ShardPeers.shardMembers); left out, the page lists each shard's URLs alone. */
  shardMembers?(): Promise<ShardRead[]>;
  /** missed hears of each part of a lookup answered as misses, its shard having had no leader for --read-hold (set here, to count them). */
  missed?: (method: Lookup) => void;
  close(): void;
}

/** RunningServer is a server that listens until closed. */
export interface RunningServer {
  /** url is the base URL, e.g. http://127.0.0.1:18000. */
  readonly url: string;
  readonly port: number;
  /** lifecycle says whether the server accepts calls. */
  readonly lifecycle: Lifecycle;
  /** reloadTls puts new certificates in place for new connections (a server started with tls). */
  reloadTls(tls: ListenerTls): void;
  /** close drains: it serves the calls in flight and those that come, keeping the port while any is in flight, then closes it and stops; idempotent. */
  close(): Promise<void>;
  /** failed resolves with the store's failure; the server then refuses every call with it, and its owner should close it and exit. */
  readonly failed: Promise<Error>;
}

/** SHUTTING_DOWN is the refusal of a call that reaches a server once it has stopped: its connections are closed by then, so only a call held until the end gets it. */
const SHUTTING_DOWN = new MetadataError(Reason.SHUTTING_DOWN, "the server is shutting down; retry against the restarted server");

/**
 * startServer serves, on one port, over HTTP/1.1 and HTTP/2: MetadataService
 * over gRPC, gRPC-Web and Connect; grpc.health.v1.Health; gRPC server
 * reflection (v1 and v1alpha); the vLLM and SGLang JSON routes; and
 * Prometheus metrics on GET /metrics. Every MetadataService call and JSON
 * route goes through one Edge.
 */
export async function startServer(ledger: Ledger, options: ServerOptions, parts: ServerParts, logger: Logger): Promise<RunningServer> {
  const lifecycle = new Lifecycle(parts.starting);
  const lag = options.overloadLagMs && parts.sampleLag === undefined ? loopLagSampler() : undefined;
  const shedder = options.overloadLagMs ? new LoadShedder(options.overloadLagMs, parts.sampleLag ?? lag!.sample) : undefined;
  const metrics = new Metrics(() => ledger.state, undefined, shedder, parts.cluster);
  const serverId = ledger.store.serverId;
  // The state is read at each use: a cluster member gets a new one each time it starts leading.
  const measured: Ledger = {
    get state() {
      return ledger.state;
    },
    store: metrics.instrument(ledger.store),
  };
  const serving = () => !lifecycle.starting && lifecycle.refusal === undefined && parts.leadership?.refusal === undefined;
  const eviction = new BackgroundEviction(measured, serving);
  const instrumented = eviction.ledger;
  const observe = metrics.observeCall.bind(metrics);
  const { access } = parts;
  const refusalLog = new RefusalLog(logger);
  // The refusals engines cannot show, of calls alone (the edge) and of a Batch's calls (the handlers), which are counted too.
  const refused = refusalLog.note.bind(refusalLog);
  const heard: CallHeard = (method, code, error) => {
    metrics.countCall(method, code);
    if (error !== undefined) refused(method, error);
  };
  const routes = [...vllmRoutes({ worldSize: options.vllmWorldSize, namespace: options.vllmNamespace }), ...sglangRoutes];
  const callIn = (set: ReadonlySet<MethodName>) => (name: string) => {
    const method = methodOfCall(name, routes);
    return method !== undefined && set.has(method);
  };
  // The calls that only read, in every framing: a caught-up standby answers them itself (StandbyReads).
  const isRead = callIn(READS);
  // The lookups, in every framing: a member that has known no leader for --read-hold answers them as misses (answeringMisses).
  const isLookup = callIn(LOOKUPS);
  const edge = new Edge({
    ledger: instrumented,
    lifecycle,
    serverId,
    observe,
    refused,
    ...options,
    reader: new HttpBodyReader(options),
    access,
    shedder,
    leadership: parts.leadership,
    position: parts.position,
    isRead,
    isLookup,
  });
  const failed = ledger.store.failed.then((error) => {
    lifecycle.refuse(error instanceof MetadataError ? error : new MetadataError(Reason.STORE_UNAVAILABLE, error.message));
    return error;
  });

  // Split into shards: every call goes through the router, which runs this shard's part here and sends the others' to their leaders.
  const local = metadataService(ledger, serverId, heard);
  const { peers } = parts;
  const routing = peers !== undefined && options.shards > 1 ? peers : undefined;
  const routed =
    routing === undefined ? localCalls(local) : shardRouter(shardCalls(options.shards, options.shard, localCalls(local), routing), ledger.state.options);
  const whole = routing === undefined ? local : routedService(routed, heard);
  // A member that has known no leader for --read-hold answers lookups as misses, in every framing (the edge lets them through).
  const { leadership } = parts;
  const misses =
    leadership &&
    leaderlessGate(
      leadership,
      (method) => metrics.unreachedLookup(method),
      () => logger.warn({ readHoldMs: options.readHoldMs }, "cluster: no leader known for --read-hold; lookups are answered as misses until one is"),
    );
  if (peers !== undefined) peers.missed = (method) => metrics.unreachedLookup(method);
  const calls = misses === undefined ? routed : callsAnsweringMisses(routed, misses);
  const service = misses === undefined ? whole : answeringMisses(whole, misses);
  // A single node is its shard's one member and leader; a member reads the cluster's shards from etcd. Both name the limits a call is held to whole.
  const topology = async (url: string) =>
    withLimits(await (peers?.topology() ?? singleNodeTopology({ count: options.shards, index: options.shard }, url)), ledger.state.options);
  // A standby passes calls to its leader unless told to refuse them (--standby-calls).
  const forward =
    parts.leadership !== undefined && options.standbyCalls === "forward"
      ? new LeaderForward(
          parts.leadership,
          options.startupHoldMs,
          options.maxBodyBytes + ENVELOPE_BYTES,
          options,
          (req) => callNameOf(req.url ?? "/", routes),
          (name, req) => edge.admitsToken(name, req),
          isRead,
          isLookup,
          parts.peerTls,
        )
      : undefined;
  const health = healthService(lifecycle, [MetadataService.typeName], shedder, parts.leadership);
  const surface = await listen(
    {
      edge,
      metadata: service,
      calls,
      routes,
      redirect: options.standbyCalls === "refuse",
      health,
      more: (router) => {
        if (parts.cluster !== undefined) router.service(ReplicationService, replicationService(parts.cluster));
      },
      topology,
      front: (services) =>
        requestHandler(serverId, new GrpcUnaryFastPath(service, edge, health), services, forward, routing && new GrpcUnaryFastPath(local, edge)),
      metrics: metrics.registry,
      metricsPrefix: "hf3fs_metadata",
      sample: async () => ({ calls: await callCounts(metrics.calls), latency: await metrics.latencyBuckets(), namespaces: statusNamespaces(ledger.state) }),
      statusSampleMs: parts.statusSampleMs,
      status: async (url, history) =>
        serverStatus({
          url,
          serverId,
          state: ledger.state,
          calls: await callCounts(metrics.calls),
          cluster: parts.cluster,
          loading: parts.loads?.status,
          history,
          part: { count: options.shards, index: options.shard },
          shards: options.shards > 1 ? shownShards(await topology(url), await peers?.shardMembers?.()) : undefined,
        }),
      access,
      metricsAuth: options.metricsAuth,
      shuttingDown: SHUTTING_DOWN,
    },
    { ...options, port: parts.bound ?? options.port, tls: parts.tls },
    logger,
  );
  const { url, port } = surface;
  if (forward !== undefined) forward.selfUrl = url;

  const expiry = setInterval(() => {
    if (lifecycle.starting) return; // the state is still loading
    ledger.state.expire();
    commit(instrumented).catch(() => undefined); // a failure resolves ledger.store.failed
  }, parts.expireIntervalMs ?? 1_000);
  expiry.unref();

  let closing: Promise<void> | undefined;
  const close = () =>
    (closing ??= (async () => {
      await surface.close();
      clearInterval(expiry);
      eviction.close();
      forward?.close();
      lag?.stop();
      peers?.close();
    })());
  // A server that listened before loading its state takes calls now, but holds them until "ready": say so, not "serving".
  const taking = parts.starting ? "taking calls: they wait until the state is loaded (ready)" : "serving";
  logger.info({ url, serverId }, parts.bound === undefined ? "listening" : taking);
  return { url, port, lifecycle, close, failed, reloadTls: surface.reloadTls };
}
