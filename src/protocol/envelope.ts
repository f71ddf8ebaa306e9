/** ENVELOPE_BYTES is the gRPC and Connect framing around a message (flags and length), allowed on top of the body limit. */
export const ENVELOPE_BYTES = 5;

/** envelope frames a message as gRPC and Connect streaming do: flags (0: uncompressed), big-endian length, message. */
export function envelope(message: Uint8Array, flags = 0): Buffer {
  const frame = Buffer.allocUnsafe(ENVELOPE_BYTES + message.length);
  frame[0] = flags;
  frame.writeUInt32BE(message.length, 1);
  frame.set(message, ENVELOPE_BYTES);
  return frame;
}
