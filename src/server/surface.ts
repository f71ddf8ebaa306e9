import type { ConnectRouter, ServiceImpl } from "@connectrpc/connect";
import type { Registry } from "prom-client";
import { file_grpc_health_v1_health, Health } from "../../gen/grpc/health/v1/health_pb.js";
import { file_grpc_reflection_v1_reflection, ServerReflection as ReflectionV1 } from "../../gen/grpc/reflection/v1/reflection_pb.js";
import { file_grpc_reflection_v1alpha_reflection, ServerReflection as ReflectionV1alpha } from "../../gen/grpc/reflection/v1alpha/reflection_pb.js";
import { ClusterService, file_hf3fs_metadata_v1_cluster } from "../../gen/hf3fs/metadata/v1/cluster_pb.js";
import { file_hf3fs_metadata_v1_metadata, MetadataService } from "../../gen/hf3fs/metadata/v1/metadata_pb.js";
import type { MetadataError } from "../core/index.js";
import { connectFraming } from "../framing/connect/connect-framing.js";
import { type ConnectionLimits, DualProtocolListener, type ListenerTls, type RequestHandler } from "../framing/http/dual-protocol-listener.js";
import type { EarlyPort } from "../framing/http/early-port.js";
import type { ListenerOptions } from "../framing/http/listener-options.js";
import { keepLeadingByteOrderMark } from "../framing/http/utf8-text.js";
import { jsonRouter } from "../framing/json/json-router.js";
import type { AccessPolicy } from "../service/access-policy.js";
import { clusterService, type Topology } from "../service/cluster-service.js";
import type { Edge } from "../service/edge.js";
import type { JsonRoute } from "../service/json/json-route.js";
import type { MetadataCalls } from "../service/metadata-calls.js";
import { reflectionService } from "../service/reflection-service.js";
import type { Logger } from "./logger.js";
import { collectListenerMetrics } from "./metrics.js";
import { serveMetrics } from "./metrics-endpoint.js";
import { serverUrl } from "./server-url.js";
import { type Readings, STATUS_SAMPLE_MS, StatusHistory } from "./status-history.js";
import type { AnyStatus } from "./status-html.js";
import { serveStatusPage } from "./status-page.js";

/** SERVICES are the services a server and a relay answer alike, as reflection and health name them (a server adds ClusterService, a member replication). */
const SERVICES = [MetadataService.typeName, Health.typeName, ReflectionV1.typeName, ReflectionV1alpha.typeName];

/** SurfaceParts are what a server and a relay put behind the same surface: their own MetadataService, health, and pages. */
export interface SurfaceParts {
  edge: Edge;
  /** metadata answers MetadataService: the local handlers, or the upstream. */
  metadata: ServiceImpl<typeof MetadataService>;
  /** calls are the same service as the JSON routes call it. */
  calls: MetadataCalls;
  routes: readonly JsonRoute[];
  /** redirect: a standby's NOT_LEADER naming the leader is a 307 to it on the JSON routes (a server's --standby-calls refuse). */
  redirect: boolean;
  health: ServiceImpl<typeof Health>;
  /** more adds services of one kind of process (a member's replication). */
  more?: (router: ConnectRouter) => void;
  /** topology is the cluster's layout at the URL the surface listens on, answered as ClusterService; undefined: not served (a relay). */
  topology?: (url: string) => Topology | Promise<Topology>;
  /** front comes before the services: it takes what it serves itself (a server's gRPC fast path, a standby's forward) and hands on the rest. */
  front?: (services: RequestHandler) => RequestHandler;
  metrics: Registry;
  /** metricsPrefix names the listener's metrics in `metrics`: a server's hf3fs_metadata, a relay's hf3fs_relay. */
  metricsPrefix: string;
  /** sample reads what the status page charts, every statusSampleMs (STATUS_SAMPLE_MS; tests take them faster). */
  sample: () => Promise<Readings>;
  statusSampleMs?: number;
  /** status builds what the status page shows, at the URL the surface listens on, with its charts. */
  status: (url: string, history: StatusHistory) => Promise<AnyStatus>;
  /** access decides which callers may call; metricsAuth asks GET /metrics and the page's data for a known token too. */
  access: AccessPolicy | undefined;
  metricsAuth: boolean;
  /** shuttingDown is the refusal of a call that reaches the process once it has stopped. */
  shuttingDown: MetadataError;
}

/** Where is where a surface listens: its port (0: any free one; an EarlyPort: bound already), its host and connections, TLS or cleartext. */
export type Where = Omit<ListenerOptions, "port"> & ConnectionLimits & { port: number | EarlyPort };

/** Surface is a server's or a relay's surface, listening until closed. */
export interface Surface {
  /** url is the base URL, e.g. http://127.0.0.1:18000. */
  readonly url: string;
  readonly port: number;
  /** reloadTls puts new certificates in place for new connections. */
  reloadTls(tls: ListenerTls): void;
  /**
   * close drains (health says NOT_SERVING): it serves the calls in flight
   * and those that come, keeping the port while any is in flight, then
   * closes the port and the connections (DualProtocolListener.close, within
   * shutdownTimeoutMs), refuses every call still held with shuttingDown and
   * stops the edge and the charts; idempotent.
   */
  close(): Promise<void>;
}

/**
 * listen serves what a server and a relay serve alike, on one port, over
 * HTTP/1.1 and HTTP/2: MetadataService at the edge (gRPC, gRPC-Web,
 * Connect; and the vLLM and SGLang JSON routes), health and reflection,
 * and, for what no service takes, /metrics and the status page with its
 * charts. The one assembly of a listener, used by startServer and
 * startRelay.
 */
export async function listen(parts: SurfaceParts, where: Where, logger: Logger): Promise<Surface> {
  keepLeadingByteOrderMark();
  const { edge } = parts;
  const history = new StatusHistory(parts.statusSampleMs ?? STATUS_SAMPLE_MS);
  const stopHistory = history.run(parts.sample);
  let url = "";
  const services = servicesOf(
    parts,
    () => parts.status(url, history),
    () => url,
  );
  const listener = new DualProtocolListener(parts.front?.(services) ?? services, where);
  collectListenerMetrics(parts.metrics, parts.metricsPrefix, () => listener.counts());
  const port = typeof where.port === "number" ? await listener.listen(where.host, where.port) : listener.adopt(where.port);
  url = serverUrl(where.host, port, where.tls !== undefined);
  let closing: Promise<void> | undefined;
  const close = () =>
    (closing ??= (async () => {
      // A process still loading refuses its held calls at once (and stops loading); one that serves drains first.
      if (edge.lifecycle.starting) edge.lifecycle.refuse(parts.shuttingDown);
      edge.lifecycle.drain();
      await listener.close(where.shutdownTimeoutMs);
      edge.lifecycle.refuse(parts.shuttingDown);
      edge.close();
      stopHistory();
      logger.info({ url }, "stopped");
    })());
  return { url, port, close, reloadTls: (tls) => listener.reloadTls(tls) };
}

/** servicesOf is what the listener hands every request to (after `front`): connect-node's services, then /metrics, the page and the JSON routes. */
function servicesOf(parts: SurfaceParts, status: () => Promise<AnyStatus>, url: () => string): RequestHandler {
  const { topology } = parts;
  const reflection = reflectionService(
    [
      file_hf3fs_metadata_v1_metadata,
      file_hf3fs_metadata_v1_cluster,
      file_grpc_health_v1_health,
      file_grpc_reflection_v1_reflection,
      file_grpc_reflection_v1alpha_reflection,
    ],
    topology === undefined ? SERVICES : [...SERVICES, ClusterService.typeName],
  );
  const json = jsonRouter(parts.calls, parts.edge, parts.routes, parts.redirect);
  const metricsAccess = parts.metricsAuth ? parts.access : undefined;
  return connectFraming(
    parts.edge,
    parts.metadata,
    (router) => {
      router.service(Health, parts.health);
      router.service(ReflectionV1, reflection);
      router.service(ReflectionV1alpha, reflection as never);
      if (topology !== undefined)
        router.service(
          ClusterService,
          clusterService(() => topology(url())),
        );
      parts.more?.(router);
    },
    (req, res) => {
      if (req.method === "GET" && req.url?.split("?")[0] === "/metrics") return void serveMetrics(parts.metrics, metricsAccess, req.headers.authorization, res);
      if (serveStatusPage(req, res, status, parts.access, parts.metricsAuth)) return;
      void json(req, res);
    },
  );
}
