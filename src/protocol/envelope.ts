/**
 * The 5-byte envelope of gRPC, gRPC-Web and Connect streaming around each
 * message: a flags byte (bit 0: compressed), then the message's length,
 * big-endian. Written and read here only: the server's codecs and
 * framings, and the client's encoder and transport.
 */

/** ENVELOPE_BYTES is the gRPC and Connect framing around a message (flags and length), allowed on top of the body limit. */
export const ENVELOPE_BYTES = 5;

/** envelope frames a message as gRPC and Connect streaming do: flags (0: uncompressed), big-endian length, message. */
export function envelope(message: Uint8Array, flags = 0): Buffer {
  const frame = framed(message.length, flags);
  frame.set(message, ENVELOPE_BYTES);
  return frame;
}

/** framed is a frame for a message of `length` bytes, its envelope written and its message left to write from ENVELOPE_BYTES on (encoders that write in place). */
export function framed(length: number, flags = 0): Buffer {
  const frame = Buffer.allocUnsafe(ENVELOPE_BYTES + length);
  frame[0] = flags;
  frame.writeUInt32BE(length, 1);
  return frame;
}

/** envelopeAt reads the envelope that starts at `at` of bytes: its flags and its message's length; undefined when fewer than ENVELOPE_BYTES are there. */
export function envelopeAt(bytes: Buffer, at = 0): { flags: number; length: number } | undefined {
  if (bytes.length - at < ENVELOPE_BYTES) return undefined;
  return { flags: bytes[at]!, length: bytes.readUInt32BE(at + 1) };
}

/** onlyMessage is the message of bytes that hold exactly one uncompressed envelope; undefined for anything else. */
export function onlyMessage(bytes: Buffer): Buffer | undefined {
  const head = envelopeAt(bytes);
  if (head === undefined || head.flags !== 0 || head.length !== bytes.length - ENVELOPE_BYTES) return undefined;
  return bytes.subarray(ENVELOPE_BYTES);
}
