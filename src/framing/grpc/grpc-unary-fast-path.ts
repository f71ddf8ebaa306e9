import type * as http2 from "node:http2";
import type { DescMessage, DescMethodUnary } from "@bufbuild/protobuf";
import { Code, ConnectError, type ServiceImpl } from "@connectrpc/connect";
import { setTrailerStatus } from "@connectrpc/connect/protocol-grpc";
import { Health } from "../../../gen/grpc/health/v1/health_pb.js";
import { MetadataService } from "../../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { MetadataError } from "../../core/index.js";
import { answerHeaders, LOG_POSITION } from "../../protocol/headers.js";
import type { Edge } from "../../service/edge.js";
import type { HealthCheck } from "../../service/health-service.js";
import type { MetadataCalls, MethodName } from "../../service/metadata-calls.js";
import { BATCH_CODECS, type MessageCodec, reflectiveCodec } from "./batch-codecs.js";
import { unwrapEnvelope } from "./grpc-envelope.js";

/** UnaryHandler is a handler as connect-node calls it: of its context, the fast path gives the caller's deadline (as `signal`) and the response's headers. */
type UnaryHandler = (request: unknown, context: { signal?: AbortSignal; responseHeader?: Headers }) => Promise<unknown>;

/** FastContext is a handler's context on the fast path: the caller's deadline, and response headers made only if a handler sets one (a member's misses: answeringMisses). */
class FastContext {
  headers: Headers | undefined;
  constructor(readonly signal: AbortSignal | undefined) {}
  get responseHeader(): Headers {
    this.headers ??= new Headers();
    return this.headers;
  }
}

/** Answered is a handler's response and the id of the server that gave it, when another did (a relay's upstream); it ends with the caller's deadline. */
type Answered = (request: unknown, deadline?: AbortSignal) => Promise<{ response: unknown; serverId?: string; unreached?: boolean }>;

interface Route {
  method: DescMethodUnary<DescMessage, DescMessage>;
  handler: UnaryHandler | undefined;
  answered: Answered | undefined;
  codec: MessageCodec;
  /** open: a call of an open service (health), which the edge admits without a token, with a small body, and does not run as a MetadataService call. */
  open?: true;
}

/**
 * GrpcUnaryFastPath serves the plain gRPC calls of MetadataService (HTTP/2,
 * content-type application/grpc or application/grpc+proto, no compression)
 * straight on node:http2's request/response, through the same edge and
 * handlers as connect-node. The messages of the write-and-read cycle go
 * through the hand-written BATCH_CODECS, the others through protobuf-es.
 * Why: connect-node's generic per-call pipeline costs many times the
 * service's own work per unary call (bench/README.md). Compressed gRPC,
 * gRPC-Web and Connect go through connect-node. Given `health`, it serves
 * grpc.health.v1.Health/Check too, as an open service: through
 * connect-node a check cost a server about four fast calls
 * (bench/probes/health-cost.ts), and the `health` command, the pods'
 * readiness probes and gRPC load balancers call it.
 */
export class GrpcUnaryFastPath {
  private readonly routes = new Map<string, Route>();

  /** impl: the handlers (a server's); or calls, whose answers carry the id of the server that gave them (a relay's upstream). */
  constructor(
    impl: ServiceImpl<typeof MetadataService> | MetadataCalls,
    private readonly edge: Edge,
    health?: HealthCheck,
  ) {
    if (health !== undefined) {
      const method = Health.method.check as DescMethodUnary<DescMessage, DescMessage>;
      const handler: UnaryHandler = async (request) => health.check(request as never);
      this.routes.set(`/${Health.typeName}/${method.name}`, {
        method,
        handler,
        answered: undefined,
        codec: reflectiveCodec(method.input, method.output),
        open: true,
      });
    }
    for (const method of MetadataService.methods) {
      if (method.methodKind !== "unary") continue;
      const handler = typeof impl === "function" ? undefined : (impl as unknown as Record<string, UnaryHandler>)[method.localName]!;
      const answered =
        typeof impl === "function" ? (request: unknown, deadline?: AbortSignal) => impl(method.localName as MethodName, request as never, deadline) : undefined;
      const codec = BATCH_CODECS[method.name] ?? reflectiveCodec(method.input, method.output);
      this.routes.set(`/${MetadataService.typeName}/${method.name}`, { method: method as DescMethodUnary<DescMessage, DescMessage>, handler, answered, codec });
    }
  }

  /** route returns the route of a request this path serves, undefined for anything else. */
  route(req: http2.Http2ServerRequest): Route | undefined {
    if (req.httpVersionMajor !== 2 || req.method !== "POST") return undefined;
    const type = req.headers["content-type"];
    if (type !== "application/grpc" && type !== "application/grpc+proto") return undefined;
    const encoding = req.headers["grpc-encoding"];
    if (encoding !== undefined && encoding !== "identity") return undefined;
    return this.routes.get(req.url);
  }

  /** serve answers one call of route: the edge reads, decodes and runs it; the answer or the error (in the trailers) is written here. */
  async serve(route: Route, req: http2.Http2ServerRequest, res: http2.Http2ServerResponse): Promise<void> {
    if (route.open) return this.serveOpen(route, req, res);
    let body: Buffer | undefined;
    let trailers: http2.OutgoingHttpHeaders = OK_TRAILERS;
    let headers = RESPONSE_HEADERS;
    try {
      const decode = (bytes: Buffer, maxEntries: number) => decodeMessage(route, unwrapEnvelope(bytes), maxEntries);
      body = await this.edge.call(route.method.name, { body: req, decode }, async (message, deadline) => {
        if (route.handler !== undefined) {
          const context = new FastContext(deadline);
          const framed = route.codec.frame(await route.handler(message, context));
          if (context.headers !== undefined) headers = { ...RESPONSE_HEADERS, ...Object.fromEntries(context.headers) };
          return framed;
        }
        const { response, serverId, unreached } = await route.answered!(message, deadline);
        if (serverId !== undefined || unreached) headers = { ...RESPONSE_HEADERS, ...answerHeaders(serverId, unreached) };
        return route.codec.frame(response);
      });
    } catch (error) {
      trailers = trailersOf(error as ConnectError); // the edge throws nothing else
    }
    if (res.stream.destroyed) return;
    const position = this.edge.position;
    if (position !== undefined && body !== undefined) headers = { ...headers, [LOG_POSITION]: String(position()) };
    answer(res, headers, body, trailers);
  }

  /** serveOpen answers a call of an open service: admitted and read by the edge as connect-node's path does, its handler run as is. */
  private async serveOpen(route: Route, req: http2.Http2ServerRequest, res: http2.Http2ServerResponse): Promise<void> {
    const call = this.edge.enter(route.method.name, req, "open");
    let body: Buffer | undefined;
    let trailers: http2.OutgoingHttpHeaders = OK_TRAILERS;
    try {
      const message = decodeMessage(route, unwrapEnvelope(await call.read()), this.edge.maxEntries);
      body = route.codec.frame(await route.handler!(message, {}));
    } catch (error) {
      trailers = trailersOf(ConnectError.from(error));
    } finally {
      call.release();
    }
    if (!res.stream.destroyed) answer(res, RESPONSE_HEADERS, body, trailers);
  }
}

/** answer writes a unary gRPC answer: the headers, the framed message if any, the trailers. */
function answer(res: http2.Http2ServerResponse, headers: http2.OutgoingHttpHeaders, body: Buffer | undefined, trailers: http2.OutgoingHttpHeaders): void {
  res.writeHead(200, headers);
  res.addTrailers(trailers);
  if (body === undefined) res.end();
  else res.end(body);
}

/** trailersOf is the gRPC trailers of an error, made once per error (a refusal is one error answered to every call it refuses). */
function trailersOf(error: ConnectError): http2.OutgoingHttpHeaders {
  let trailers = errorTrailers.get(error);
  if (trailers === undefined) {
    const headers = setTrailerStatus(new Headers(), error);
    for (const [key, value] of error.metadata) headers.set(key, value);
    trailers = Object.fromEntries(headers);
    errorTrailers.set(error, trailers);
  }
  return trailers;
}

const errorTrailers = new WeakMap<ConnectError, http2.OutgoingHttpHeaders>();

const RESPONSE_HEADERS: http2.OutgoingHttpHeaders = { "content-type": "application/grpc+proto" };
const OK_TRAILERS = { "grpc-status": "0" };

/** decodeMessage parses a request message; a malformed one is the client's error, INVALID_ARGUMENT. */
function decodeMessage(route: Route, bytes: Buffer, maxEntries: number): unknown {
  try {
    return route.codec.decode(bytes, maxEntries);
  } catch (e) {
    if (e instanceof MetadataError) throw e; // too many entries
    throw new ConnectError(`cannot decode ${route.method.input.typeName}: ${(e as Error).message}`, Code.InvalidArgument);
  }
}
