import { Code, ConnectError } from "@connectrpc/connect";
import { ENVELOPE_BYTES, envelopeAt } from "../../protocol/envelope.js";

/**
 * oneEnvelope splits the one envelope of a request body that takes one
 * message (a unary or server-streaming call: flag byte, big-endian length,
 * message). No message is INVALID_ARGUMENT; more or less than one whole
 * message is UNIMPLEMENTED.
 */
export function oneEnvelope(body: Buffer): { flags: number; message: Buffer } {
  const head = envelopeAt(body);
  if (head === undefined) throw new ConnectError("missing gRPC message", Code.InvalidArgument);
  if (body.length !== ENVELOPE_BYTES + head.length) throw new ConnectError("a unary call takes exactly one message", Code.Unimplemented);
  return { flags: head.flags, message: body.subarray(ENVELOPE_BYTES) };
}

/**
 * unwrapEnvelope reads the one uncompressed message of a unary gRPC or
 * gRPC-Web request body (oneEnvelope); a compressed flag without
 * grpc-encoding is INVALID_ARGUMENT.
 */
export function unwrapEnvelope(body: Buffer): Buffer {
  if ((envelopeAt(body)?.flags ?? 0) !== 0) throw new ConnectError("compressed message without grpc-encoding", Code.InvalidArgument);
  return oneEnvelope(body).message;
}
