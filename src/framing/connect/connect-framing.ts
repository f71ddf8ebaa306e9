import type * as http from "node:http";
import { type DescMessage, type DescMethod, fromBinary, fromJsonString } from "@bufbuild/protobuf";
import { MethodOptions_IdempotencyLevel } from "@bufbuild/protobuf/wkt";
import {
  Code,
  ConnectError,
  type ConnectRouter,
  type ContextValues,
  createConnectRouter,
  createContextKey,
  createContextValues,
  type Interceptor,
  type ServiceImpl,
} from "@connectrpc/connect";
import type { UniversalServerRequest } from "@connectrpc/connect/protocol";
import { compressionBrotli, compressionGzip, universalRequestFromNodeRequest, universalResponseToNodeResponse } from "@connectrpc/connect-node";
import { ReplicationService } from "../../../gen/hf3fs/metadata/internal/v1/replication_pb.js";
import { ClusterService } from "../../../gen/hf3fs/metadata/v1/cluster_pb.js";
import { MetadataService } from "../../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { LOG_POSITION } from "../../protocol/headers.js";
import { type Admission, type Edge, type EdgeCall, OPEN_BODY_BYTES, type Prepare } from "../../service/edge.js";
import { checkJsonValues } from "../../service/json/json-body.js";
import { checkMessageEntries } from "../../service/message-entries.js";
import type { RequestHandler } from "../http/dual-protocol-listener.js";
import type { BodyStream } from "../http/read-body.js";
import { framingOf, plainGet, plainMessageOf, plainStream, wrapped } from "./plain-request.js";

/**
 * connectFraming serves, through connect-node, MetadataService and the
 * services that `openServices` registers (gRPC with compression, gRPC-Web
 * and Connect, on HTTP/1.1 and HTTP/2), and hands every other request to
 * `fallback`. Every request enters the edge once (plainRequest): the
 * edge admits it and reads its body before connect-node decodes it, and an
 * interceptor runs the MetadataService call decoded (commit, observation,
 * error mapping) as the same EdgeCall, which connect-node carries in the
 * request's context values. ReplicationService and ClusterService need only the token
 * check; health and reflection stay open to every caller, with small
 * bounded bodies.
 */
export function connectFraming(
  edge: Edge,
  metadata: ServiceImpl<typeof MetadataService>,
  openServices: (router: ConnectRouter) => void,
  fallback: RequestHandler,
): RequestHandler {
  const atEdge: Interceptor = (next) => (req) => {
    const call = req.contextValues.get(EDGE_CALL);
    // plainRequest entered and read every MetadataService request that connect-node decodes; any other is refused before.
    if (call === undefined) throw new ConnectError(`${req.method.name} reached its handler without entering the edge`, Code.Internal);
    const answered = call.run(
      () => req.message,
      () => next(req),
      req.signal,
    );
    const position = edge.position;
    if (position === undefined) return answered;
    return answered.then((res) => {
      res.header.set(LOG_POSITION, String(position()));
      return res;
    });
  };
  // connect-node decompresses nothing: plainRequest hands it identity-encoded messages. readMaxBytes bounds them once more.
  const router = createConnectRouter({ acceptCompression: [compressionGzip, compressionBrotli], readMaxBytes: edge.maxBodyBytes });
  router.service(MetadataService, metadata, { interceptors: [atEdge] });
  openServices(router);
  const handlers = new Map(router.handlers.map((h) => [h.requestPath, h]));
  return (req, res) => {
    const path = req.url?.split("?", 2)[0] ?? "";
    const handler = handlers.get(path);
    if (handler === undefined) return fallback(req, res);
    const context = createContextValues();
    const universal = universalRequestFromNodeRequest(req as http.IncomingMessage, res as http.ServerResponse, undefined, context);
    handler(plainRequest(edge, handler.method, universal, req, context))
      .then((answer) => universalResponseToNodeResponse(answer, res as http.ServerResponse))
      .catch((reason: unknown) => {
        // The client went away mid-answer; anything else would be a bug of the stack: end the exchange either way.
        if (ConnectError.from(reason).code === Code.Aborted) return;
        if ("stream" in res) res.stream.destroy();
        else res.destroy();
      });
  };
}

/**
 * plainRequest is the request connect-node gets: its body read through
 * the edge (checked as its service's admission asks, within the limits and
 * the body budget, waiting out the startup hold where calls do), its
 * messages decompressed, bounded and checked here, and its encoding
 * headers dropped, so that connect-node decodes only what was bounded.
 * A Connect GET becomes the POST of the same message. A request of a type
 * connect-node does not serve gets an empty body (it answers 415).
 */
function plainRequest(edge: Edge, method: DescMethod, universal: UniversalServerRequest, req: BodyStream, context: ContextValues): UniversalServerRequest {
  const service = method.parent.typeName;
  const admission: Admission = service === MetadataService.typeName ? "call" : TOKEN_SERVICES.has(service) ? "token" : "open";
  const name = TOKEN_SERVICES.get(service)?.concat(".", method.name) ?? method.name;
  const check = (message: Buffer, maxEntries: number, json: boolean) =>
    admission === "call" ? checkMessage(message, maxEntries, method.input, json) : checkEntries(message, maxEntries, method.input, json);
  if (universal.method === "GET") {
    if (method.idempotency !== MethodOptions_IdempotencyLevel.NO_SIDE_EFFECTS) return { ...universal, body: EMPTY };
    const get = plainGet(universal);
    const body = preparedBody(entered(edge, name, req, admission, context), async (held, maxEntries, maxBytes) => {
      const message = await plainMessageOf(get.framing, get.query, held, maxBytes);
      check(message, maxEntries, get.framing.json);
      return message;
    });
    return { ...get.request, body };
  }
  const framing = framingOf(universal.header);
  if (framing === undefined) return { ...universal, body: EMPTY };
  const header = new Headers(universal.header);
  header.delete(framing.encodingHeader);
  if (method.methodKind === "client_streaming" || method.methodKind === "bidi_streaming") {
    const held = edge.reader.holder(req);
    const body = plainStream(framing, req as AsyncIterable<Uint8Array>, held, OPEN_BODY_BYTES, (message) => check(message, edge.maxEntries, framing.json));
    return { ...universal, header, body };
  }
  const body = preparedBody(entered(edge, name, req, admission, context), async (held, maxEntries, maxBytes) => {
    const message = await plainMessageOf(framing, held.bytes, held, maxBytes);
    check(message, maxEntries, framing.json);
    return wrapped(framing, message);
  });
  return { ...universal, header, body };
}

/** TOKEN_SERVICES are the services whose calls need only a known token (every member answers them, leader or not), with the prefix of their calls' names. */
const TOKEN_SERVICES: ReadonlyMap<string, string> = new Map([
  [ReplicationService.typeName, "replication"],
  [ClusterService.typeName, "cluster"],
]);

/** EMPTY is the body of a request that connect-node refuses without reading it. */
const EMPTY: AsyncIterable<Uint8Array> = { async *[Symbol.asyncIterator]() {} };

/** EDGE_CALL carries a request's EdgeCall from plainRequest, which reads it, to the interceptor that runs it. */
const EDGE_CALL = createContextKey<EdgeCall | undefined>(undefined, { description: "the request's call at the edge" });

/** entered starts the request's call at the edge and puts it in the request's context values. */
function entered(edge: Edge, method: string, req: BodyStream, admission: Admission, context: ContextValues): EdgeCall {
  const call = edge.enter(method, req, admission);
  context.set(EDGE_CALL, call);
  return call;
}

/** preparedBody is a body the edge reads and `prepare` turns into its plain message, as the byte stream connect-node reads; its bytes count until connect-node has read it. */
async function* preparedBody(call: EdgeCall, prepare: Prepare): AsyncIterable<Uint8Array> {
  try {
    yield await call.read(prepare);
  } finally {
    call.release();
  }
}

/**
 * checkMessage refuses, before connect-node decodes it, a plain message of
 * too many entries or one that does not decode (connect-node would answer
 * INTERNAL without a detail).
 */
function checkMessage(bytes: Buffer, maxEntries: number, input: DescMessage, json: boolean): void {
  checkEntries(bytes, maxEntries, input, json);
  try {
    if (json) fromJsonString(input, bytes.toString("utf8"));
    else fromBinary(input, bytes);
  } catch (error) {
    throw invalid(input, (error as Error).message);
  }
}

/** checkEntries refuses a plain message of more than maxEntries entries (LIMIT_EXCEEDED), whatever its service. */
function checkEntries(bytes: Buffer, maxEntries: number, input: DescMessage, json: boolean): void {
  if (json) checkJsonValues(bytes, maxEntries);
  else checkMessageEntries(input, bytes, maxEntries);
}

/** invalid is the INVALID_ARGUMENT of a request message that cannot be read. */
function invalid(input: DescMessage, why: string): ConnectError {
  return new ConnectError(`cannot decode ${input.typeName}: ${why}`, Code.InvalidArgument);
}
