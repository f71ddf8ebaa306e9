import type * as http2 from "node:http2";
import type { GrpcUnaryFastPath } from "../framing/grpc/grpc-unary-fast-path.js";
import type { RequestHandler } from "../framing/http/dual-protocol-listener.js";
import { SERVER_ID_HEADER, SHARD_LOCAL_HEADER } from "../protocol/headers.js";
import { breakOff, type LeaderForward } from "./leader-forward.js";

/**
 * requestHandler stamps every response with the server id (a server's; a
 * relay's responses carry the upstream's), then hands plain
 * gRPC calls of MetadataService (and health checks) to the fast path and everything else to
 * `other` (the connect framing, which falls back to the JSON routes and
 * /metrics). On a standby of a cluster that forwards, calls go to the
 * leader instead (LeaderForward). In a cluster split into shards, a call
 * another shard's leader sent (SHARD_LOCAL_HEADER, over plain gRPC) goes to
 * `shardLocal`, the fast path of this shard's own handlers, not routed again.
 */
export function requestHandler(
  serverId: string | undefined,
  fastPath: GrpcUnaryFastPath,
  other: RequestHandler,
  forward?: LeaderForward,
  shardLocal?: GrpcUnaryFastPath,
): RequestHandler {
  const here: RequestHandler = (req, res) => {
    const path = shardLocal !== undefined && req.headers[SHARD_LOCAL_HEADER] !== undefined ? shardLocal : fastPath;
    const fast = req.httpVersionMajor === 2 ? path.route(req as http2.Http2ServerRequest) : undefined;
    if (fast !== undefined) return void path.serve(fast, req as http2.Http2ServerRequest, res as http2.Http2ServerResponse);
    other(req, res);
  };
  return (req, res) => {
    if (serverId !== undefined) res.setHeader(SERVER_ID_HEADER, serverId);
    // A forward never fails the process: whatever it did not foresee ends this call alone.
    if (forward?.takes(req)) return void forward.forward(req, res, () => here(req, res)).catch((error: Error) => breakOff(res, error));
    here(req, res);
  };
}
