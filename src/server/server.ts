import type * as http from "node:http";
import type * as http2 from "node:http2";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { file_grpc_health_v1_health, Health } from "../../gen/grpc/health/v1/health_pb.js";
import { file_grpc_reflection_v1_reflection, ServerReflection as ReflectionV1 } from "../../gen/grpc/reflection/v1/reflection_pb.js";
import { file_grpc_reflection_v1alpha_reflection, ServerReflection as ReflectionV1alpha } from "../../gen/grpc/reflection/v1alpha/reflection_pb.js";
import { file_hf3fs_metadata_v1_metadata, MetadataService } from "../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { MetadataError, Reason } from "../core/errors.js";
import { healthService } from "../service/health-service.js";
import { jsonRouter } from "../service/json/json-router.js";
import { sglangRoutes } from "../service/json/sglang-routes.js";
import { vllmRoutes } from "../service/json/vllm-routes.js";
import { Lifecycle } from "../service/lifecycle.js";
import { commit, type Ledger, metadataService } from "../service/metadata-service.js";
import { reflectionService } from "../service/reflection-service.js";
import { SERVER_ID_HEADER } from "../service/server-id-header.js";
import { type Edge, serviceInterceptor } from "../service/edge.js";
import { DualProtocolListener, type RequestHandler } from "./dual-protocol-listener.js";
import { GrpcUnaryFastPath } from "./grpc-unary-fast-path.js";
import type { Logger } from "./logger.js";
import { Metrics } from "./metrics.js";
import { keepLeadingByteOrderMark } from "./utf8-text.js";

/** ServerConfig is what a running server needs beyond its ledger. */
export interface ServerConfig {
  host: string;
  port: number;
  maxBodyBytes: number;
  shutdownTimeoutMs: number;
  /** expireIntervalMs is how often due deadlines are processed without traffic. Defaults to 1 s. */
  expireIntervalMs?: number;
}

/** RunningServer is a server that listens until closed. */
export interface RunningServer {
  /** url is the base URL, e.g. http://127.0.0.1:18000. */
  readonly url: string;
  readonly port: number;
  /** close drains calls in flight (new calls get UNAVAILABLE) and stops; idempotent. */
  close(): Promise<void>;
  /** failed resolves with the store's failure; the server then refuses every call with it, and its owner should close it and exit. */
  readonly failed: Promise<Error>;
}

/** SERVICES are the services this server answers, as reflection and health name them. */
const SERVICES = [MetadataService.typeName, Health.typeName, ReflectionV1.typeName, ReflectionV1alpha.typeName];

/**
 * startServer serves, on one port, over HTTP/1.1 and HTTP/2: MetadataService
 * over gRPC, gRPC-Web and Connect; grpc.health.v1.Health; gRPC server
 * reflection (v1 and v1alpha); the vLLM and SGLang JSON routes; and
 * Prometheus metrics on GET /metrics.
 */
export async function startServer(ledger: Ledger, config: ServerConfig, logger: Logger): Promise<RunningServer> {
  keepLeadingByteOrderMark();
  const lifecycle = new Lifecycle();
  const metrics = new Metrics(ledger.state);
  const serverId = ledger.store.serverId;
  const edge: Edge = { lifecycle, serverId, observe: (method, code, seconds) => metrics.observeCall(method, code, seconds) };
  const instrumented: Ledger = { state: ledger.state, store: metrics.instrument(ledger.store) };
  const failed = ledger.store.failed.then((error) => {
    lifecycle.refuse(error instanceof MetadataError ? error : new MetadataError(Reason.STORE_UNAVAILABLE, error.message));
    return error;
  });

  const service = metadataService(instrumented);
  const fastPath = new GrpcUnaryFastPath(service, edge, config.maxBodyBytes);
  const reflection = reflectionService(
    [file_hf3fs_metadata_v1_metadata, file_grpc_health_v1_health, file_grpc_reflection_v1_reflection, file_grpc_reflection_v1alpha_reflection],
    SERVICES,
  );
  const json = jsonRouter(instrumented, edge, [...vllmRoutes, ...sglangRoutes], config.maxBodyBytes);
  const adapter = connectNodeAdapter({
    routes: (router) => {
      router.service(MetadataService, service, { interceptors: [serviceInterceptor(edge)] });
      router.service(Health, healthService(lifecycle, [MetadataService.typeName]));
      router.service(ReflectionV1, reflection);
      router.service(ReflectionV1alpha, reflection as never);
    },
    readMaxBytes: config.maxBodyBytes,
    fallback: (req, res) => {
      if (req.method === "GET" && req.url?.split("?")[0] === "/metrics") return void serveMetrics(metrics, res);
      void json(req, res);
    },
  });
  const listener = new DualProtocolListener(requestHandler(serverId, fastPath, adapter));
  const port = await listener.listen(config.host, config.port);
  const url = `http://${config.host.includes(":") ? `[${config.host}]` : config.host}:${port}`;

  const expiry = setInterval(() => {
    ledger.state.expire();
    commit(instrumented).catch(() => undefined); // a failure resolves ledger.store.failed
  }, config.expireIntervalMs ?? 1_000);
  expiry.unref();

  let closing: Promise<void> | undefined;
  const close = () =>
    (closing ??= (async () => {
      lifecycle.refuse(new MetadataError(Reason.SHUTTING_DOWN, "the server is shutting down; retry against the restarted server"));
      clearInterval(expiry);
      await listener.close(config.shutdownTimeoutMs);
      logger.info({ url }, "stopped");
    })());
  logger.info({ url, serverId }, "listening");
  return { url, port, close, failed };
}

/**
 * requestHandler stamps every response with the server id, then hands plain
 * gRPC calls of MetadataService to the fast path and everything else to
 * connect-node (which falls back to the JSON routes and /metrics).
 */
export function requestHandler(serverId: string, fastPath: GrpcUnaryFastPath, adapter: ReturnType<typeof connectNodeAdapter>): RequestHandler {
  return (req, res) => {
    res.setHeader(SERVER_ID_HEADER, serverId);
    const fast = req.httpVersionMajor === 2 ? fastPath.route(req as http2.Http2ServerRequest) : undefined;
    if (fast !== undefined) return fastPath.serve(fast, req as http2.Http2ServerRequest, res as http2.Http2ServerResponse);
    adapter(req as http.IncomingMessage & http2.Http2ServerRequest, res as http.ServerResponse & http2.Http2ServerResponse);
  };
}

async function serveMetrics(metrics: Metrics, res: Parameters<NonNullable<Parameters<typeof connectNodeAdapter>[0]["fallback"]>>[1]): Promise<void> {
  const body = await metrics.registry.metrics();
  res.writeHead(200, { "content-type": metrics.registry.contentType });
  res.end(body);
}
