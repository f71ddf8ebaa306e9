// request-frames.ts: the load client's requests of the cycle, written
// straight into one gRPC-framed Buffer. protobuf-es's toBinary was 45% of
// the load process's CPU at B=512 (a TextEncoder call and a copy per key),
// which made the client, not the server, the side that saturated.
// test/bench/request-frames.test.ts checks them against protobuf-es.
import { varintLength } from "../../src/framing/grpc/varint.js";

/** Field is one field of a request: a string, repeated strings, a uint32, or a packed int32 run. A singular default ("" or 0) and an empty run are left out, as proto3 does. */
type Field =
  | { n: number; string: string }
  | { n: number; strings: readonly string[] }
  | { n: number; uint32: number }
  | { n: number; int32s: readonly number[] };

export function batchAllocateFrame(namespace: string, rank: number, keys: readonly string[], prefixKeys: readonly string[]): Buffer {
  return frame([
    { n: 1, string: namespace },
    { n: 2, uint32: rank },
    { n: 3, strings: keys },
    { n: 4, strings: prefixKeys },
  ]);
}

export function confirmWriteFrame(namespace: string, rank: number, keys: readonly string[], pages: readonly number[]): Buffer {
  return frame([
    { n: 1, string: namespace },
    { n: 2, uint32: rank },
    { n: 3, strings: keys },
    { n: 4, int32s: pages },
  ]);
}

export function batchExistsFrame(namespace: string, keys: readonly string[]): Buffer {
  return frame([
    { n: 1, string: namespace },
    { n: 2, strings: keys },
  ]);
}

export function getLocationsFrame(namespace: string, rank: number, keys: readonly string[]): Buffer {
  return frame([
    { n: 1, string: namespace },
    { n: 2, uint32: rank },
    { n: 3, strings: keys },
  ]);
}

/** frame writes the fields, in order, after the 5-byte gRPC message header. */
function frame(fields: Field[]): Buffer {
  let size = 0;
  for (const field of fields) {
    if ("string" in field) size += field.string === "" ? 0 : stringSize(field.string);
    else if ("strings" in field) for (const s of field.strings) size += stringSize(s);
    else if ("uint32" in field) size += field.uint32 === 0 ? 0 : 1 + varintLength(field.uint32);
    else if (field.int32s.length > 0) size += 1 + varintLength(packedSize(field.int32s)) + packedSize(field.int32s);
  }
  const buf = Buffer.allocUnsafe(5 + size);
  buf[0] = 0;
  buf.writeUInt32BE(size, 1);
  let pos = 5;
  const writeString = (n: number, s: string) => {
    buf[pos++] = (n << 3) | 2;
    pos = writeVarint(buf, pos, Buffer.byteLength(s));
    pos += buf.write(s, pos, "utf8");
  };
  for (const field of fields) {
    if ("string" in field) {
      if (field.string !== "") writeString(field.n, field.string); // proto3 leaves a singular default out
    } else if ("strings" in field) for (const s of field.strings) writeString(field.n, s);
    else if ("uint32" in field) {
      if (field.uint32 === 0) continue;
      buf[pos++] = field.n << 3;
      pos = writeVarint(buf, pos, field.uint32);
    } else if (field.int32s.length > 0) {
      buf[pos++] = (field.n << 3) | 2;
      pos = writeVarint(buf, pos, packedSize(field.int32s));
      for (const v of field.int32s) pos = v < 0 ? writeNegative(buf, pos, v) : writeVarint(buf, pos, v);
    }
  }
  return buf;
}

/** stringSize is the size of one length-delimited string field with a one-byte tag (every field number here is below 16). */
function stringSize(s: string): number {
  const length = Buffer.byteLength(s);
  return 1 + varintLength(length) + length;
}

function packedSize(values: readonly number[]): number {
  let size = 0;
  for (const v of values) size += v < 0 ? 10 : varintLength(v);
  return size;
}

function writeVarint(buf: Buffer, pos: number, v: number): number {
  while (v >= 0x80) {
    buf[pos++] = (v & 0x7f) | 0x80;
    v >>>= 7;
  }
  buf[pos++] = v;
  return pos;
}

/** writeNegative writes a negative int32 as protobuf does: sign-extended to 64 bits, 10 bytes. */
function writeNegative(buf: Buffer, pos: number, v: number): number {
  let lo = v >>> 0;
  for (let i = 0; i < 4; i++) {
    buf[pos++] = (lo & 0x7f) | 0x80;
    lo >>>= 7;
  }
  buf[pos++] = (lo & 0x0f) | 0x70 | 0x80; // the top 4 bits of the low word, then ones
  for (let i = 0; i < 4; i++) buf[pos++] = 0xff;
  buf[pos++] = 0x01;
  return pos;
}
