import type * as http from "node:http";
import type * as http2 from "node:http2";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { MetadataService } from "../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { MetadataError, Reason } from "../core/errors.js";
import { commit, type Ledger, metadataService } from "../service/metadata-service.js";
import { SERVER_ID_HEADER } from "../service/server-id-header.js";
import { jsonRouter } from "../service/json/json-router.js";
import { sglangRoutes } from "../service/json/sglang-routes.js";
import { vllmRoutes } from "../service/json/vllm-routes.js";
import { serviceInterceptor } from "../service/service-interceptor.js";
import { DualProtocolListener } from "./dual-protocol-listener.js";
import { GrpcUnaryFastPath } from "./grpc-unary-fast-path.js";
import type { Logger } from "./logger.js";

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

/**
 * startServer serves MetadataService over gRPC, gRPC-Web and Connect, on
 * HTTP/1.1 and HTTP/2 on one port.
 */
export async function startServer(ledger: Ledger, config: ServerConfig, logger: Logger): Promise<RunningServer> {
  const lifecycle: { refusal: MetadataError | undefined } = { refusal: undefined };
  const failed = ledger.store.failed.then((error) => {
    lifecycle.refusal ??= error instanceof MetadataError ? error : new MetadataError(Reason.STORE_UNAVAILABLE, error.message);
    return error;
  });
  const service = metadataService(ledger);
  const fastPath = new GrpcUnaryFastPath(service, lifecycle, ledger.store.serverId, config.maxBodyBytes);
  const adapter = connectNodeAdapter({
    routes: (router) => router.service(MetadataService, service),
    interceptors: [serviceInterceptor(lifecycle, ledger.store.serverId)],
    readMaxBytes: config.maxBodyBytes,
    fallback: jsonRouter(ledger, lifecycle, [...vllmRoutes, ...sglangRoutes], config.maxBodyBytes),
  });
  const serverId = ledger.store.serverId;
  const listener = new DualProtocolListener((req, res) => {
    res.setHeader(SERVER_ID_HEADER, serverId);
    const fast = req.httpVersionMajor === 2 ? fastPath.route(req as http2.Http2ServerRequest) : undefined;
    if (fast !== undefined) return fastPath.serve(fast, req as http2.Http2ServerRequest, res as http2.Http2ServerResponse);
    adapter(req as http.IncomingMessage & http2.Http2ServerRequest, res as http.ServerResponse & http2.Http2ServerResponse);
  });
  const port = await listener.listen(config.host, config.port);
  const url = `http://${config.host.includes(":") ? `[${config.host}]` : config.host}:${port}`;

  const expiry = setInterval(() => {
    ledger.state.expire();
    commit(ledger).catch(() => undefined); // a failure resolves ledger.store.failed
  }, config.expireIntervalMs ?? 1_000);
  expiry.unref();

  let closing: Promise<void> | undefined;
  const close = () =>
    (closing ??= (async () => {
      lifecycle.refusal ??= new MetadataError(Reason.SHUTTING_DOWN, "the server is shutting down; retry against the restarted server");
      clearInterval(expiry);
      await listener.close(config.shutdownTimeoutMs);
      logger.info({ url }, "stopped");
    })());
  logger.info({ url, serverId }, "listening");
  return { url, port, close, failed };
}
