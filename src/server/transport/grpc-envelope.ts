import { Code, ConnectError } from "@connectrpc/connect";

/**
 * oneEnvelope splits the one envelope of a request body that takes one
 * message (a unary or server-streaming call: flag byte, big-endian length,
 * message). No message is INVALID_ARGUMENT; more or less than one whole
 * message is UNIMPLEMENTED.
 */
export function oneEnvelope(body: Buffer): { flags: number; message: Buffer } {
  if (body.length < 5) throw new ConnectError("missing gRPC message", Code.InvalidArgument);
  const length = body.readUInt32BE(1);
  if (body.length !== 5 + length) throw new ConnectError("a unary call takes exactly one message", Code.Unimplemented);
  return { flags: body[0]!, message: body.subarray(5) };
}

/**
 * unwrapEnvelope reads the one uncompressed message of a unary gRPC or
 * gRPC-Web request body (oneEnvelope); a compressed flag without
 * grpc-encoding is INVALID_ARGUMENT.
 */
export function unwrapEnvelope(body: Buffer): Buffer {
  if (body.length >= 5 && body[0] !== 0) throw new ConnectError("compressed message without grpc-encoding", Code.InvalidArgument);
  return oneEnvelope(body).message;
}
