import { type DescField, type DescMessage, type MessageShape, ScalarType, toBinary } from "@bufbuild/protobuf";
import { FeatureSet_FieldPresence } from "@bufbuild/protobuf/wkt";
import { ENVELOPE_BYTES, envelope, framed } from "../protocol/envelope.js";
import { type KeyBytes, keyBytesOf } from "../service/key-bytes.js";

/**
 * encodeFramed writes a request message in its gRPC frame (the 5-byte
 * envelope, then the message) in two passes over its fields: sizes, then
 * bytes, strings by Buffer.write. Why by hand: protobuf-es's toBinary
 * (TextEncoder per string, a chunk per field) was the largest share of a
 * relay's CPU in its profile (bench/README.md, the relay); this takes the
 * flat messages of MetadataService's requests (strings, 32-bit integers,
 * booleans, enums, and lists of them; and messages of such messages, as a
 * Batch's) and hands any other message to toBinary. Keys a codec left as
 * bytes (a relay's or a routing member's requests: keyBytesOf) are copied
 * as they came, never made strings and encoded again.
 * test/client/flat-encoder.test.ts holds its bytes to toBinary's.
 */
export function encodeFramed<Desc extends DescMessage>(schema: Desc, message: MessageShape<Desc>): Buffer {
  const plan = planOf(schema);
  if (plan === undefined) return envelope(toBinary(schema, message));
  const size = bodySize(plan, message);
  const out = framed(size);
  let at = ENVELOPE_BYTES;
  for (const field of plan) at = field.write(fieldOf(message, field.name), out, at);
  return out;
}

/** fieldOf is a field of a message: its keys as bytes where a codec left them (keyBytesOf), else the field. */
function fieldOf(message: object, name: string): unknown {
  return keyBytesOf(message, name) ?? (message as Record<string, unknown>)[name];
}

/** FieldPlan sizes and writes one field of a flat message (nothing for a value protobuf leaves out). */
interface FieldPlan {
  readonly name: string;
  size(value: unknown): number;
  write(value: unknown, out: Buffer, at: number): number;
}

const plans = new WeakMap<DescMessage, FieldPlan[] | null>();

/** planOf is the plan of a flat message, undefined for any other (it goes to toBinary). */
function planOf(schema: DescMessage): FieldPlan[] | undefined {
  let plan = plans.get(schema);
  if (plan === undefined) {
    plans.set(schema, null); // a message that holds itself is not flat
    const fields = [...schema.fields].sort((a, b) => a.number - b.number).map(fieldPlan);
    plan = fields.every((f) => f !== undefined) ? (fields as FieldPlan[]) : null;
    plans.set(schema, plan);
  }
  return plan ?? undefined;
}

/** sizes holds the size of each nested message from the sizing pass to the writing pass of one encode. */
const sizes = new WeakMap<object, number>();

/** bodySize is a flat message's encoded size, kept for its writing pass. */
function bodySize(plan: FieldPlan[], message: object): number {
  let size = 0;
  for (const field of plan) size += field.size(fieldOf(message, field.name));
  sizes.set(message, size);
  return size;
}

/**
 * messagePlan is the plan of a field holding flat messages (Batch's calls:
 * a list of messages each holding one request in a oneof), or undefined.
 * A oneof's member reads the oneof's {case, value} and writes only its case.
 */
function messagePlan(field: DescField): FieldPlan | undefined {
  if (field.message === undefined) return undefined;
  const nested = planOf(field.message);
  if (nested === undefined) return undefined;
  const tag = tagOf(field.number, 2);
  const one = (m: object) => {
    const size = bodySize(nested, m);
    return varintSize(tag) + varintSize(size) + size;
  };
  const write = (m: object, out: Buffer, at: number) => {
    let next = writeVarint(sizes.get(m)!, out, writeVarint(tag, out, at));
    for (const plan of nested) next = plan.write(fieldOf(m, plan.name), out, next);
    return next;
  };
  if (field.fieldKind === "list") {
    return {
      name: field.localName,
      size: (v) => (v as object[]).reduce((sum, m) => sum + one(m), 0),
      write: (v, out, at) => (v as object[]).reduce((next, m) => write(m, out, next), at),
    };
  }
  if (field.oneof !== undefined) {
    const name = field.localName;
    const mine = (v: unknown) => (v as { case?: string } | undefined)?.case === name;
    return {
      name: field.oneof.localName,
      size: (v) => (mine(v) ? one((v as { value: object }).value) : 0),
      write: (v, out, at) => (mine(v) ? write((v as { value: object }).value, out, at) : at),
    };
  }
  return {
    name: field.localName,
    size: (v) => (v === undefined ? 0 : one(v as object)),
    write: (v, out, at) => (v === undefined ? at : write(v as object, out, at)),
  };
}

/** SCALARS are the scalar types a flat message may hold, as varints (but STRING). */
const VARINTS = new Set([ScalarType.INT32, ScalarType.UINT32, ScalarType.BOOL]);

/** fieldPlan is the plan of one field; undefined for a field of a kind this encoder leaves to toBinary. */
function fieldPlan(field: DescField): FieldPlan | undefined {
  const name = field.localName;
  const lengthTag = tagOf(field.number, 2);
  const varintTag = tagOf(field.number, 0);
  const implicit = field.presence === FeatureSet_FieldPresence.IMPLICIT;
  if (field.fieldKind === "message" || (field.fieldKind === "list" && field.listKind === "message")) return messagePlan(field);
  if (field.oneof !== undefined) return undefined;
  if (field.fieldKind === "scalar" && field.scalar === ScalarType.STRING) {
    return {
      name,
      size: (v) => (v === undefined || (implicit && v === "") ? 0 : stringSize(lengthTag, v as string)),
      write: (v, out, at) => (v === undefined || (implicit && v === "") ? at : writeString(lengthTag, v as string, out, at)),
    };
  }
  if ((field.fieldKind === "scalar" && VARINTS.has(field.scalar)) || field.fieldKind === "enum") {
    const skip = (v: unknown) => v === undefined || (implicit && (v === 0 || v === false));
    return {
      name,
      size: (v) => (skip(v) ? 0 : varintSize(varintTag) + varintSize(int(v))),
      write: (v, out, at) => (skip(v) ? at : writeVarint(int(v), out, writeVarint(varintTag, out, at))),
    };
  }
  if (field.fieldKind === "list" && field.listKind === "scalar" && field.scalar === ScalarType.STRING) {
    return {
      name,
      size: (v) => (Array.isArray(v) ? v.reduce((sum, s) => sum + stringSize(lengthTag, s), 0) : keyBytesSize(lengthTag, v as KeyBytes)),
      write: (v, out, at) =>
        Array.isArray(v) ? v.reduce((next, s) => writeString(lengthTag, s, out, next), at) : writeKeyBytes(lengthTag, v as KeyBytes, out, at),
    };
  }
  if (field.fieldKind === "list" && field.listKind === "scalar" && VARINTS.has(field.scalar) && field.packed) {
    const bodySize = (v: unknown[]) => v.reduce<number>((sum, x) => sum + varintSize(int(x)), 0);
    return {
      name,
      size: (v) => {
        const list = v as unknown[];
        if (list.length === 0) return 0;
        const body = bodySize(list);
        return varintSize(lengthTag) + varintSize(body) + body;
      },
      write: (v, out, at) => {
        const list = v as unknown[];
        if (list.length === 0) return at;
        let next = writeVarint(bodySize(list), out, writeVarint(lengthTag, out, at));
        for (const x of list) next = writeVarint(int(x), out, next);
        return next;
      },
    };
  }
  return undefined;
}

/** tagOf is a field's tag: its number and wire type. */
function tagOf(number: number, wireType: number): number {
  return ((number << 3) | wireType) >>> 0;
}

/** int is a varint field's value as protobuf writes it: booleans as 0 and 1, negative int32s as 64-bit two's complement (varintSize, writeVarint). */
function int(value: unknown): number {
  return value === true ? 1 : value === false ? 0 : (value as number);
}

function stringSize(tag: number, value: string): number {
  const bytes = Buffer.byteLength(value, "utf8");
  return varintSize(tag) + varintSize(bytes) + bytes;
}

function writeString(tag: number, value: string, out: Buffer, at: number): number {
  const bytes = Buffer.byteLength(value, "utf8");
  const start = writeVarint(bytes, out, writeVarint(tag, out, at));
  return start + out.write(value, start, bytes, "utf8");
}

function keyBytesSize(tag: number, keys: KeyBytes): number {
  let size = 0;
  for (let i = 0; i < keys.length; i++) {
    const bytes = keys.ends[i]! - keys.starts[i]!;
    size += varintSize(tag) + varintSize(bytes) + bytes;
  }
  return size;
}

function writeKeyBytes(tag: number, keys: KeyBytes, out: Buffer, at: number): number {
  const bytes = keys.bytes;
  let next = at;
  for (let i = 0; i < keys.length; i++) {
    const start = keys.starts[i]!;
    const end = keys.ends[i]!;
    next = writeVarint(end - start, out, writeVarint(tag, out, next));
    // A short key by a loop: Buffer.copy's fixed cost is about that of moving 40 bytes one by one.
    if (end - start > 40) next += bytes.copy(out, next, start, end);
    else for (let b = start; b < end; b++) out[next++] = bytes[b]!;
  }
  return next;
}

/** varintSize is the bytes of a varint: a negative int32 takes 10, sign-extended to 64 bits as protobuf writes it. */
function varintSize(value: number): number {
  if (value < 0) return 10;
  let size = 1;
  for (let v = value; v >= 0x80; v = Math.floor(v / 128)) size++;
  return size;
}

function writeVarint(value: number, out: Buffer, at: number): number {
  if (value < 0) {
    // Two's complement over 64 bits: the low 32 bits, then ones.
    let low = value >>> 0;
    for (let i = 0; i < 4; i++) {
      out[at++] = (low & 0x7f) | 0x80;
      low >>>= 7;
    }
    out[at++] = (low & 0x0f) | 0x70 | 0x80;
    for (let i = 0; i < 4; i++) out[at++] = 0xff;
    out[at++] = 0x01;
    return at;
  }
  let v = value;
  while (v >= 0x80) {
    out[at++] = (v & 0x7f) | 0x80;
    v = Math.floor(v / 128);
  }
  out[at++] = v;
  return at;
}
