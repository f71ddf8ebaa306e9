import { Code, ConnectError } from "@connectrpc/connect";

/**
 * unwrapEnvelope reads the one uncompressed message of a unary gRPC or
 * gRPC-Web request body (flag byte, big-endian length, message). No message
 * and a compressed flag without grpc-encoding are INVALID_ARGUMENT; more or
 * less than one whole message is UNIMPLEMENTED (a unary call takes one).
 */
export function unwrapEnvelope(body: Buffer): Buffer {
  if (body.length < 5) throw new ConnectError("missing gRPC message", Code.InvalidArgument);
  if (body[0] !== 0) throw new ConnectError("compressed message without grpc-encoding", Code.InvalidArgument);
  const length = body.readUInt32BE(1);
  if (body.length !== 5 + length) throw new ConnectError("a unary call takes exactly one message", Code.Unimplemented);
  return body.subarray(5);
}
