import type * as http2 from "node:http2";
import type { GrpcUnaryFastPath } from "../framing/grpc/grpc-unary-fast-path.js";
import type { RequestHandler } from "../framing/http/dual-protocol-listener.js";
import { SERVER_ID_HEADER } from "../protocol/headers.js";
import { breakOff, type LeaderForward } from "./leader-forward.js";

/**
 * requestHandler stamps every response with the server id, then hands plain
 * gRPC calls of MetadataService to the fast path and everything else to
 * `other` (the connect framing, which falls back to the JSON routes and
 * /metrics). On a standby of a cluster that forwards, calls go to the
 * leader instead (LeaderForward).
 */
export function requestHandler(serverId: string, fastPath: GrpcUnaryFastPath, other: RequestHandler, forward?: LeaderForward): RequestHandler {
  const here: RequestHandler = (req, res) => {
    const fast = req.httpVersionMajor === 2 ? fastPath.route(req as http2.Http2ServerRequest) : undefined;
    if (fast !== undefined) return void fastPath.serve(fast, req as http2.Http2ServerRequest, res as http2.Http2ServerResponse);
    other(req, res);
  };
  return (req, res) => {
    res.setHeader(SERVER_ID_HEADER, serverId);
    // A forward never fails the process: whatever it did not foresee ends this call alone.
    if (forward?.takes(req)) return void forward.forward(req, res, () => here(req, res)).catch((error: Error) => breakOff(res, error));
    here(req, res);
  };
}
