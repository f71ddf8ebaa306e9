import { Code, ConnectError } from "@connectrpc/connect";
import type { UniversalServerRequest } from "@connectrpc/connect/protocol";
import { compressionBrotli, compressionGzip } from "@connectrpc/connect-node";
import { ENVELOPE_BYTES, envelope, envelopeAt } from "../../protocol/envelope.js";
import type { Held } from "../../service/body-reader.js";
import { oneEnvelope } from "../grpc/grpc-envelope.js";

/**
 * Framing is how a request that connect-node serves carries its messages,
 * read from its headers: the Connect unary body (the message itself), an
 * enveloped stream (Connect streaming, gRPC, gRPC-Web: flags, length,
 * message), or gRPC-Web's base64 text of envelopes.
 */
export interface Framing {
  readonly kind: "unary" | "enveloped" | "text";
  /** json: the messages are JSON, not binary protobuf. */
  readonly json: boolean;
  /** encoding names the compression of the messages ("gzip", "br"); undefined: identity. */
  readonly encoding: string | undefined;
  /** encodingHeader is the header that names it, dropped from the plain request. */
  readonly encodingHeader: string;
}

/** COMPRESSED is the envelope flag of a compressed message (gRPC, gRPC-Web, Connect streaming). */
const COMPRESSED = 0x01;

/**
 * framingOf reads the framing of a POST from its content type; undefined
 * for a type connect-node does not serve either (it answers 415 without
 * reading the body).
 */
export function framingOf(header: Headers): Framing | undefined {
  const type = header.get("content-type") ?? "";
  const json = /[+/]json(;|$)/.test(type);
  if (type.startsWith("application/grpc-web-text")) return framing("text", json, header, "grpc-encoding");
  if (type.startsWith("application/grpc")) return framing("enveloped", json, header, "grpc-encoding");
  if (type.startsWith("application/connect+")) return framing("enveloped", json, header, "connect-content-encoding");
  if (type.startsWith("application/proto") || type.startsWith("application/json")) return framing("unary", json, header, "content-encoding");
  return undefined;
}

function framing(kind: Framing["kind"], json: boolean, header: Headers, encodingHeader: string): Framing {
  const encoding = header.get(encodingHeader) ?? undefined;
  return { kind, json, encoding: encoding === "identity" ? undefined : encoding, encodingHeader };
}

/**
 * plainMessageOf is the one message of a request body held in `held` (unary and
 * server-streaming calls take one), decompressed within maxBytes and the
 * body budget: every byte it makes is counted in `held` before it is
 * made. Its envelope, if any, is read as oneEnvelope reads it.
 */
export async function plainMessageOf(framing: Framing, body: Buffer, held: Held, maxBytes: number): Promise<Buffer> {
  if (framing.kind === "unary") return framing.encoding === undefined ? body : decompress(framing.encoding, body, held, maxBytes);
  const { flags, message } = oneEnvelope(framing.kind === "text" ? Buffer.from(body.toString("latin1"), "base64") : body);
  return messageOf(framing, flags, message, held, maxBytes);
}

/** wrapped is a plain message framed as `framing` frames it, uncompressed. */
export function wrapped(framing: Framing, message: Buffer): Buffer {
  if (framing.kind === "unary") return message;
  const framed = envelope(message);
  return framing.kind === "text" ? Buffer.from(framed.toString("base64"), "latin1") : framed;
}

/**
 * plainStream reads a stream of envelopes (a client-streaming or
 * bidirectional call) as it arrives, each message within maxBytes,
 * decompressed and passed to `check`, and yields it again uncompressed.
 * Every byte it holds (a partial envelope, a message being decompressed)
 * is counted in `held` while held.
 */
export async function* plainStream(
  framing: Framing,
  body: AsyncIterable<Uint8Array>,
  held: Held,
  maxBytes: number,
  check: (message: Buffer) => void,
): AsyncGenerator<Uint8Array> {
  if (framing.kind !== "enveloped") throw new ConnectError("a streaming call needs enveloped messages", Code.Unimplemented);
  let pending = Buffer.alloc(0);
  try {
    for await (const chunk of body) {
      held.take(chunk.length);
      pending = pending.length === 0 ? Buffer.from(chunk) : Buffer.concat([pending, chunk]);
      for (let head = envelopeAt(pending); head !== undefined; head = envelopeAt(pending)) {
        const { flags, length } = head;
        if (length > maxBytes) throw new ConnectError(`a message larger than ${maxBytes} bytes`, Code.ResourceExhausted);
        if (pending.length < ENVELOPE_BYTES + length) break;
        const message = await messageOf(framing, flags, pending.subarray(ENVELOPE_BYTES, ENVELOPE_BYTES + length), held, maxBytes);
        check(message);
        held.give(ENVELOPE_BYTES + length);
        pending = pending.subarray(ENVELOPE_BYTES + length);
        yield envelope(message, flags & ~COMPRESSED);
        // A decompressed message was counted as it was made (decompress); read, it is given back.
        if ((flags & COMPRESSED) !== 0) held.give(message.length);
      }
    }
    if (pending.length > 0) throw new ConnectError("the stream ended inside a message", Code.InvalidArgument);
  } finally {
    held.release();
  }
}

/** messageOf is an envelope's message, decompressed when its flags say so. */
function messageOf(framing: Framing, flags: number, message: Buffer, held: Held, maxBytes: number): Promise<Buffer> | Buffer {
  if ((flags & COMPRESSED) === 0) return message;
  if (framing.encoding === undefined) throw new ConnectError(`a compressed message without ${framing.encodingHeader}`, Code.InvalidArgument);
  return decompress(framing.encoding, message, held, maxBytes);
}

/**
 * decompress inflates with connect-node's own codecs, bounded by what the
 * budget can hold (at most maxBytes): that room is counted before the
 * codec runs, and what the message did not need is given back.
 */
async function decompress(encoding: string, bytes: Uint8Array, held: Held, maxBytes: number): Promise<Buffer> {
  const codec = encoding === compressionGzip.name ? compressionGzip : encoding === compressionBrotli.name ? compressionBrotli : undefined;
  if (codec === undefined) throw new ConnectError(`unsupported compression ${encoding}; this server accepts gzip and br`, Code.Unimplemented);
  const room = held.room(maxBytes);
  held.take(room);
  let made = 0;
  try {
    const out = await codec.decompress(bytes, room);
    made = out.length;
    return Buffer.from(out.buffer, out.byteOffset, out.byteLength);
  } finally {
    held.give(room - made);
  }
}

/**
 * plainGet is a Connect GET (the message in the query) as the POST that
 * carries the same message: connect-node then reads it from a body, which
 * comes through the edge like every other call's (token check, startup
 * hold, limits). Its framing: Connect unary, with the query's encoding and
 * compression.
 */
export function plainGet(request: UniversalServerRequest): { request: UniversalServerRequest; framing: Framing; query: Buffer } {
  const params = new URL(request.url).searchParams;
  const json = params.get("encoding") === "json";
  const message = params.get("message") ?? "";
  const query = params.get("base64") === "1" ? Buffer.from(message, "base64url") : Buffer.from(message, "utf8");
  const header = new Headers(request.header);
  header.set("content-type", json ? "application/json" : "application/proto");
  if (params.get("connect") === "v1") header.set("connect-protocol-version", "1");
  const compression = params.get("compression") ?? undefined;
  const framing: Framing = { kind: "unary", json, encoding: compression === "identity" ? undefined : compression, encodingHeader: "compression" };
  return { request: { ...request, method: "POST", header }, framing, query };
}
