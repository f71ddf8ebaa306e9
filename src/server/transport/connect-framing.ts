import type * as http from "node:http";
import type * as http2 from "node:http2";
import { type DescMessage, type DescMethod, fromBinary, fromJsonString } from "@bufbuild/protobuf";
import { Code, ConnectError, type ConnectRouter, createConnectRouter, type Interceptor, type ServiceImpl } from "@connectrpc/connect";
import { compressionBrotli, compressionGzip, universalRequestFromNodeRequest, universalResponseToNodeResponse } from "@connectrpc/connect-node";
import { MetadataService } from "../../../gen/hf3fs/metadata/v1/metadata_pb.js";
import type { Edge } from "../../service/edge.js";
import { checkJsonValues } from "../../service/json/json-body.js";
import { checkMessageEntries } from "../../service/message-entries.js";
import type { RequestHandler } from "./dual-protocol-listener.js";
import { unwrapEnvelope } from "./grpc-envelope.js";

/**
 * connectFraming serves, through connect-node, MetadataService and the
 * services that `openServices` registers (gRPC with compression, gRPC-Web
 * and Connect, on HTTP/1.1 and HTTP/2), and hands every other request to
 * `fallback`. A MetadataService call passes the edge twice: the edge reads
 * its body (refusal, body limit) before connect-node decodes it, and runs
 * the call (refusal, commit, observation, error mapping) as an interceptor.
 * The other services (health, reflection) stay open to every caller.
 */
export function connectFraming(
  edge: Edge,
  metadata: ServiceImpl<typeof MetadataService>,
  openServices: (router: ConnectRouter) => void,
  fallback: RequestHandler,
): RequestHandler {
  const atEdge: Interceptor = (next) => (req) =>
    edge.callDecoded(req.method.name, req.header.get("authorization") ?? undefined, req.signal, req.message, () => next(req));
  // The edge bounds the body already; readMaxBytes also bounds a compressed message once decompressed.
  const router = createConnectRouter({ acceptCompression: [compressionGzip, compressionBrotli], readMaxBytes: edge.maxBodyBytes });
  router.service(MetadataService, metadata, { interceptors: [atEdge] });
  openServices(router);
  const handlers = new Map(router.handlers.map((h) => [h.requestPath, h]));
  return (req, res) => {
    const path = req.url?.split("?", 2)[0] ?? "";
    const handler = handlers.get(path);
    if (handler === undefined) return fallback(req, res);
    const universal = universalRequestFromNodeRequest(req as http.IncomingMessage, res as http.ServerResponse, undefined, undefined);
    const guarded = handler.service.typeName === MetadataService.typeName;
    handler(guarded ? { ...universal, body: edgeBody(edge, handler.method, req) } : universal)
      .then((answer) => universalResponseToNodeResponse(answer, res as http.ServerResponse))
      .catch((reason: unknown) => {
        // The client went away mid-answer; anything else would be a bug of the stack: end the exchange either way.
        if (ConnectError.from(reason).code === Code.Aborted) return;
        if ("stream" in res) res.stream.destroy();
        else res.destroy();
      });
  };
}

/** edgeBody is a request body read by the edge, as the byte stream connect-node reads. */
async function* edgeBody(edge: Edge, method: DescMethod, req: http.IncomingMessage | http2.Http2ServerRequest): AsyncIterable<Uint8Array> {
  yield await edge.readFor(method.name, req, (bytes, maxEntries) => checkMessage(bytes, maxEntries, method.input, req.headers));
}

/**
 * checkMessage refuses, before connect-node decodes it, a body of too many
 * entries or one that does not decode (connect-node would answer INTERNAL
 * without a detail): a Connect unary message (binary or JSON), or the
 * message of a gRPC or gRPC-Web envelope. A compressed message is bounded
 * by readMaxBytes once decompressed, and left to connect-node.
 */
function checkMessage(bytes: Buffer, maxEntries: number, input: DescMessage, headers: http.IncomingHttpHeaders): void {
  const type = headers["content-type"] ?? "";
  const json = type.endsWith("json");
  if (type.startsWith("application/grpc")) {
    if (type.includes("text")) return;
    const encoded = headers["grpc-encoding"] !== undefined && headers["grpc-encoding"] !== "identity";
    if (encoded && bytes.length >= 5 && (bytes[0]! & 1) === 1) return;
    bytes = unwrapEnvelope(bytes);
  } else if (headers["content-encoding"] !== undefined && headers["content-encoding"] !== "identity") {
    return;
  }
  if (json) checkJsonValues(bytes, maxEntries);
  else checkMessageEntries(input, bytes, maxEntries);
  try {
    if (json) fromJsonString(input, bytes.toString("utf8"));
    else fromBinary(input, bytes);
  } catch (error) {
    throw invalid(input, (error as Error).message);
  }
}

/** invalid is the INVALID_ARGUMENT of a request message that cannot be read. */
function invalid(input: DescMessage, why: string): ConnectError {
  return new ConnectError(`cannot decode ${input.typeName}: ${why}`, Code.InvalidArgument);
}
