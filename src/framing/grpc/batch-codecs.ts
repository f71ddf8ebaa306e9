import { isAscii } from "node:buffer";
import { create, type DescMessage, fromBinary, toBinary } from "@bufbuild/protobuf";
import { BinaryReader, WireType } from "@bufbuild/protobuf/wire";
import {
  type BatchAllocateRequest,
  type BatchAllocateResponse,
  type BatchCall,
  BatchCallSchema,
  type BatchExistsRequest,
  type BatchExistsResponse,
  type BatchRequest,
  type BatchResponse,
  BatchResultSchema,
  CallErrorSchema,
  type ConfirmWriteRequest,
  type ConfirmWriteResponse,
  type GetLocationsRequest,
  type GetLocationsResponse,
  MetadataService,
} from "../../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { ENVELOPE_BYTES, envelope, framed } from "../../protocol/envelope.js";
import type { BatchedMethod } from "../../service/batch-calls.js";
import { KeyBytesMessage, type KeyField } from "../../service/key-bytes.js";
import { checkMessageEntries, tooManyEntries } from "../../service/message-entries.js";
import { varintLength } from "./varint.js";

/** MessageCodec turns a method's request bytes into a message and its answer into bytes. */
export interface MessageCodec {
  /** decode reads a request; past maxEntries entries in its repeated fields, it stops with LIMIT_EXCEEDED. */
  decode(bytes: Buffer, maxEntries: number): unknown;
  /** encode takes a message or an init object of the output type (what a handler returns). */
  encode(message: unknown): Uint8Array;
  /** frame is encode inside its gRPC frame (uncompressed), for the response body. */
  frame(message: unknown): Buffer;
}

/** reflectiveCodec is protobuf-es's generic codec for a pair of message types: right for any message; entries are counted before decoding. */
export function reflectiveCodec(input: DescMessage, output: DescMessage): MessageCodec {
  return {
    decode: (bytes, maxEntries) => {
      checkMessageEntries(input, bytes, maxEntries);
      return fromBinary(input, bytes);
    },
    encode: (message) => toBinary(output, create(output, message as never)),
    frame: (message) => envelope(toBinary(output, create(output, message as never))),
  };
}

/**
 * BATCH_CODECS are codecs written out by hand, the way protoc plugins
 * generate them, for the four RPCs of the write-and-read cycle, by method
 * name: protobuf-es decodes through reflection, about twice as slow
 * (`bench/probes/protobuf-probe.ts`). These read the same wire format with
 * protobuf-es's own BinaryReader, accept everything a conforming encoder
 * may send (fields in any order, repeated scalars packed or not, unknown
 * fields, a scalar's last value winning), reject malformed input and
 * invalid UTF-8, and give the same messages as the generic codec, with
 * their keys also as bytes (key-bytes.ts). They write answers straight into
 * the response frame, byte for byte as protobuf-es would;
 * test/unit/server/batch-codecs.test.ts checks both on random messages.
 */
export const BATCH_CODECS: Readonly<Record<string, MessageCodec>> = {
  BatchAllocate: handCodec(decodeBatchAllocate, (m) => encodeBatchAllocate(m as BatchAllocateResponse)),
  ConfirmWrite: handCodec(decodeConfirmWrite, (m) => encodeConfirmWrite(m as ConfirmWriteResponse)),
  BatchExists: handCodec(decodeBatchExists, (m) => encodeBatchExists(m as BatchExistsResponse)),
  GetLocations: handCodec(decodeGetLocations, (m) => encodeGetLocations(m as GetLocationsResponse)),
  Batch: handCodec(decodeBatch, (m) => encodeBatch(m as BatchResponse)),
};

/** DECODERS are the request decoders of the methods a Batch carries, by their BatchCall case. */
const DECODERS: Record<BatchedMethod, (bytes: Buffer, maxEntries: number, entries: Entries) => unknown> = {
  batchAllocate: decodeBatchAllocate,
  confirmWrite: decodeConfirmWrite,
  batchExists: decodeBatchExists,
  getLocations: decodeGetLocations,
};

/**
 * BATCH_CASES are the cases of a BatchCall, with their field numbers there
 * and in a BatchResult (the contract's), their decoders and their
 * methods' codecs (by the method's name).
 */
const BATCH_CASES = BatchCallSchema.fields.map((field) => {
  const name = field.localName as BatchedMethod;
  return {
    case: name,
    field: field.number,
    resultField: BatchResultSchema.field[name].number,
    decode: DECODERS[name],
    method: MetadataService.method[name].name,
  };
});

/** BATCH_ERROR is the field of a BatchResult's error. */
const BATCH_ERROR = BatchResultSchema.field.error.number;

/**
 * decodeBatch reads a Batch, each call by its method's codec over its own
 * bytes, counting the entries of all of them together (one Batch carries
 * at most what one call may, as checkMessageEntries counts them: a field
 * for each call and one for its case, then the call's own); the calls'
 * keys stay bytes, released with the Batch (KeyBytesMessage.adopt).
 */
function decodeBatch(bytes: Buffer, maxEntries: number): BatchRequest {
  const message = Object.assign(new KeyBytesMessage(bytes), { $typeName: "hf3fs.metadata.v1.BatchRequest" as const, calls: [] as BatchCall[] });
  const entries = new Entries(maxEntries);
  const reader = new FieldReader(bytes, entries);
  while (reader.pos < reader.len) {
    reader.count();
    const field = reader.fieldTag();
    if (field !== 1) {
      reader.skip(reader.wireType, field);
      continue;
    }
    const call: BatchCall = { $typeName: "hf3fs.metadata.v1.BatchCall", call: { case: undefined } };
    const inner = new FieldReader(reader.messageField(), entries);
    while (inner.pos < inner.len) {
      inner.count();
      const number = inner.fieldTag();
      const known = BATCH_CASES.find((c) => c.field === number);
      if (known === undefined) {
        inner.skip(inner.wireType, number);
        continue;
      }
      const value = known.decode(inner.messageField(), maxEntries, entries);
      message.adopt(value as unknown as KeyBytesMessage);
      call.call = { case: known.case, value } as BatchCall["call"]; // a oneof's last field wins
    }
    message.calls.push(call);
  }
  return message;
}

/** encodeBatch writes a Batch's results, each response by its method's codec and each error as protobuf-es writes it. */
function encodeBatch(message: Partial<BatchResponse>): Buffer {
  const bodies = (message.results ?? []).map(({ result }) => {
    if (result.case === "error") return { field: BATCH_ERROR, bytes: toBinary(CallErrorSchema, create(CallErrorSchema, result.value)) };
    const known = BATCH_CASES.find((c) => c.case === result.case);
    if (known === undefined) return undefined; // a result of no case: an empty BatchResult
    return { field: known.resultField, bytes: BATCH_CODECS[known.method]!.encode(result.value) };
  });
  const resultLength = (body: (typeof bodies)[number]) => (body === undefined ? 0 : 1 + varintLength(body.bytes.length) + body.bytes.length);
  let length = 0;
  for (const body of bodies) length += 1 + varintLength(resultLength(body)) + resultLength(body);
  const writer = new FrameWriter(length);
  for (const body of bodies) {
    writer.tag(1, WireType.LengthDelimited).varint(resultLength(body));
    if (body !== undefined) writer.tag(body.field, WireType.LengthDelimited).varint(body.bytes.length).bytes(body.bytes);
  }
  return writer.frame;
}

function handCodec(decode: MessageCodec["decode"], frame: MessageCodec["frame"]): MessageCodec {
  return { decode, frame, encode: (message) => frame(message).subarray(5) };
}

function decodeBatchAllocate(bytes: Buffer, maxEntries: number, entries = new Entries(maxEntries)): BatchAllocateRequest {
  const message = Object.assign(new KeyBytesMessage(bytes), { $typeName: "hf3fs.metadata.v1.BatchAllocateRequest" as const, namespace: "", rank: 0 });
  readFields(bytes, entries, message, (field, reader) => {
    if (field === 1) message.namespace = reader.stringField();
    else if (field === 2) message.rank = reader.uint32Field();
    else if (field === 3) reader.keyField(message, "keys");
    else if (field === 4) reader.keyField(message, "prefixKeys");
    else return false;
    return true;
  });
  return message;
}

function decodeConfirmWrite(bytes: Buffer, maxEntries: number, entries = new Entries(maxEntries)): ConfirmWriteRequest {
  const message = Object.assign(new KeyBytesMessage(bytes), {
    $typeName: "hf3fs.metadata.v1.ConfirmWriteRequest" as const,
    namespace: "",
    rank: 0,
    pages: [] as number[],
    pagesToRelease: [] as number[],
    keysToRelease: [] as string[],
  });
  readFields(bytes, entries, message, (field, reader) => {
    if (field === 1) message.namespace = reader.stringField();
    else if (field === 2) message.rank = reader.uint32Field();
    else if (field === 3) reader.keyField(message, "keys");
    else if (field === 4) reader.int32Fields(message.pages);
    else if (field === 5) reader.int32Fields(message.pagesToRelease);
    else if (field === 6) message.keysToRelease.push(reader.stringField());
    else return false;
    return true;
  });
  return message;
}

function decodeBatchExists(bytes: Buffer, maxEntries: number, entries = new Entries(maxEntries)): BatchExistsRequest {
  const message: KeyBytesMessage & { $typeName: "hf3fs.metadata.v1.BatchExistsRequest"; namespace: string; rank?: number; callerRank?: number } = Object.assign(
    new KeyBytesMessage(bytes),
    { $typeName: "hf3fs.metadata.v1.BatchExistsRequest" as const, namespace: "" },
  );
  readFields(bytes, entries, message, (field, reader) => {
    if (field === 1) message.namespace = reader.stringField();
    else if (field === 2) reader.keyField(message, "keys");
    else if (field === 3) message.rank = reader.uint32Field();
    else if (field === 4) message.callerRank = reader.uint32Field();
    else return false;
    return true;
  });
  return message;
}

function decodeGetLocations(bytes: Buffer, maxEntries: number, entries = new Entries(maxEntries)): GetLocationsRequest {
  const message = Object.assign(new KeyBytesMessage(bytes), {
    $typeName: "hf3fs.metadata.v1.GetLocationsRequest" as const,
    namespace: "",
    rank: 0,
    includeIncomplete: false,
  });
  readFields(bytes, entries, message, (field, reader) => {
    if (field === 1) message.namespace = reader.stringField();
    else if (field === 2) message.rank = reader.uint32Field();
    else if (field === 3) reader.keyField(message, "keys");
    else if (field === 4) message.includeIncomplete = reader.boolField();
    else return false;
    return true;
  });
  return message;
}

function encodeBatchAllocate(message: Partial<BatchAllocateResponse>): Buffer {
  const pages = message.pages ?? [];
  const statuses = message.statuses ?? [];
  const pagesLength = int32sLength(pages);
  const statusesLength = int32sLength(statuses);
  const writer = new FrameWriter(packedLength(pagesLength) + packedLength(statusesLength));
  writer.packedInt32s(1, pages, pagesLength);
  writer.packedInt32s(2, statuses, statusesLength);
  return writer.frame;
}

function encodeConfirmWrite(message: Partial<ConfirmWriteResponse>): Buffer {
  const confirmed = message.confirmed ?? 0;
  const released = message.released ?? 0;
  const completed = message.completed ?? [];
  const completedLength = int32sLength(completed);
  const writer = new FrameWriter(
    (confirmed > 0 ? 1 + varintLength(confirmed) : 0) + (released > 0 ? 1 + varintLength(released) : 0) + packedLength(completedLength),
  );
  if (confirmed > 0) writer.tag(1, WireType.Varint).varint(confirmed);
  if (released > 0) writer.tag(2, WireType.Varint).varint(released);
  writer.packedInt32s(3, completed, completedLength);
  return writer.frame;
}

function encodeBatchExists(message: Partial<BatchExistsResponse>): Buffer {
  const exists = message.exists ?? [];
  const writer = new FrameWriter(packedLength(exists.length)); // a bool is one byte
  if (exists.length > 0) {
    writer.tag(1, WireType.LengthDelimited).varint(exists.length);
    for (const value of exists) writer.byte(value ? 1 : 0);
  }
  return writer.frame;
}

function encodeGetLocations(message: Partial<GetLocationsResponse>): Buffer {
  const pages = message.pages ?? [];
  const pagesLength = int32sLength(pages);
  const writer = new FrameWriter(packedLength(pagesLength));
  writer.packedInt32s(1, pages, pagesLength);
  return writer.frame;
}

/** int32sLength is the size of int32 values as varints (a negative one is sign-extended to 64 bits: 10 bytes). */
function int32sLength(values: readonly number[]): number {
  let length = 0;
  for (const value of values) length += value < 0 ? 10 : varintLength(value);
  return length;
}

/** packedLength is the size of a packed field (tag of one byte, length, values) whose values take `length` bytes; 0 when empty. */
function packedLength(length: number): number {
  return length === 0 ? 0 : 1 + varintLength(length) + length;
}

/**
 * FrameWriter writes a response message straight into its gRPC frame,
 * allocated once at its exact size (the 5-byte prefix, then the message),
 * with no intermediate buffer to copy: the sizes are counted first.
 */
class FrameWriter {
  readonly frame: Buffer;
  private pos = ENVELOPE_BYTES;

  constructor(length: number) {
    this.frame = framed(length);
  }

  byte(value: number): this {
    this.frame[this.pos++] = value;
    return this;
  }

  bytes(value: Uint8Array): this {
    this.frame.set(value, this.pos);
    this.pos += value.length;
    return this;
  }

  tag(field: number, wireType: WireType): this {
    return this.varint((field << 3) | wireType);
  }

  /** varint writes a uint32. */
  varint(value: number): this {
    while (value > 0x7f) {
      this.frame[this.pos++] = (value & 0x7f) | 0x80;
      value >>>= 7;
    }
    this.frame[this.pos++] = value;
    return this;
  }

  /** int32 writes an int32 as protobuf does: a negative one as its 64-bit two's complement, in 10 bytes. */
  int32(value: number): this {
    if (value >= 0) return this.varint(value);
    let low = value >>> 0;
    for (let i = 0; i < 4; i++) {
      this.frame[this.pos++] = (low & 0x7f) | 0x80;
      low >>>= 7;
    }
    this.frame[this.pos++] = low | 0x70 | 0x80; // bits 28-31, then the high word's first three bits (all ones)
    for (let i = 0; i < 4; i++) this.frame[this.pos++] = 0xff;
    this.frame[this.pos++] = 0x01;
    return this;
  }

  /** packedInt32s writes a packed field whose values take `length` bytes; nothing when empty. */
  packedInt32s(field: number, values: readonly number[], length: number): void {
    if (length === 0) return;
    this.tag(field, WireType.LengthDelimited).varint(length);
    for (const value of values) this.int32(value);
  }
}

/**
 * readFields reads every field of a message from bytes into `message`,
 * counting them against the request's entries as it goes: readField reads the ones it
 * knows (with the FieldReader's methods, which check the wire type) and
 * returns false for the others, which are skipped. Then the keys are
 * checked to be UTF-8.
 */
function readFields(bytes: Buffer, entries: Entries, message: KeyBytesMessage, readField: (field: number, reader: FieldReader) => boolean): void {
  const reader = new FieldReader(bytes, entries);
  while (reader.pos < reader.len) {
    reader.count();
    const field = reader.fieldTag();
    if (!readField(field, reader)) reader.skip(reader.wireType, field);
  }
  reader.checkKeys(message);
}

const strictUtf8 = new TextDecoder("utf-8", { fatal: true });

/** checkUtf8 throws unless bytes[start .. end) is UTF-8; a run of ASCII is checked in JavaScript, without a view. */
function checkUtf8(bytes: Buffer, start: number, end: number): void {
  for (let i = start; i < end; i++) {
    if (bytes[i]! >= 0x80) {
      strictUtf8.decode(bytes.subarray(start, end));
      return;
    }
  }
}

/** Entries count a request's entries (fields, and values of packed runs) against its bound, across the messages it holds. */
class Entries {
  private count = 0;

  constructor(private readonly max: number) {}

  /** take counts one entry, and throws LIMIT_EXCEEDED past the bound. */
  take(): void {
    if (++this.count > this.max) throw tooManyEntries(this.max);
  }
}

/** FieldReader is protobuf-es's BinaryReader over a request Buffer, with a reader per field type that checks the field's wire type. */
class FieldReader extends BinaryReader {
  /** wireType is the wire type of the field about to be read. */
  wireType = WireType.Varint;
  /** keysFrom and keysTo span every key read, for one check of them all (checkKeys). */
  private keysFrom = Number.POSITIVE_INFINITY;
  private keysTo = 0;

  constructor(
    private readonly buffer: Buffer,
    /** entries bound the request's entries, so that decoding stops at the limit instead of after it. */
    private readonly entries: Entries,
  ) {
    super(buffer);
  }

  /** count counts one entry of the request (a field, or a value of a packed run), and throws LIMIT_EXCEEDED past its bound (Entries). */
  count(): void {
    this.entries.take();
  }

  /** lengthDelimited reads a length-delimited field's header and returns where its bytes start; pos is left at their end. */
  private lengthDelimited(): number {
    this.expect(WireType.LengthDelimited);
    const length = this.uint32();
    const start = this.pos;
    const end = start + length;
    if (end > this.len) throw new RangeError("premature EOF");
    this.pos = end;
    return start;
  }

  /** messageField reads a message field's bytes (a view of the request's). */
  messageField(): Buffer {
    const start = this.lengthDelimited();
    return this.buffer.subarray(start, this.pos);
  }

  /**
   * stringField reads a UTF-8 string straight from the Buffer. Node's
   * decoder puts U+FFFD in place of invalid UTF-8; only then is the strict
   * decoder asked, to reject it as protobuf-es does.
   */
  stringField(): string {
    const start = this.lengthDelimited();
    const end = this.pos;
    const text = this.buffer.toString("utf8", start, end);
    if (text.includes("\uFFFD")) strictUtf8.decode(this.buffer.subarray(start, end));
    return text;
  }

  /**
   * fieldTag reads a field's tag as protobuf-es's BinaryReader.tag does (the
   * same checks, the same errors), without the array it returns: it sets
   * wireType and returns the field number.
   */
  fieldTag(): number {
    const start = this.pos;
    const tag = this.uint32();
    const bytesRead = this.pos - start;
    if (bytesRead > 5 || (bytesRead === 5 && this.buffer[this.pos - 1]! > 0x0f)) throw new Error("illegal tag: varint overflows uint32");
    const field = tag >>> 3;
    this.wireType = tag & 7;
    if (field <= 0 || this.wireType > 5) throw new Error(`illegal tag: field no ${field} wire type ${this.wireType}`);
    return field;
  }

  /** keyField reads a repeated string's value as a byte range of the request; checkKeys checks it is UTF-8, as protobuf-es does. */
  keyField(message: KeyBytesMessage, field: KeyField): void {
    const start = this.lengthDelimited();
    const end = this.pos;
    if (start < this.keysFrom) this.keysFrom = start;
    if (end > this.keysTo) this.keysTo = end;
    message.addKey(field, start, end);
  }

  /**
   * checkKeys throws unless every key read is UTF-8. One native check of the
   * whole request, or else of the span of the keys (in a ConfirmWrite the
   * pages' varints are not ASCII, but they follow the keys), spares a check
   * per key when all of them are ASCII.
   */
  checkKeys(message: KeyBytesMessage): void {
    if (this.keysTo === 0) return;
    if (isAscii(this.buffer) || isAscii(this.buffer.subarray(this.keysFrom, this.keysTo))) return;
    for (const list of Object.values(message.keyLists)) for (let i = 0; i < list.length; i++) checkUtf8(this.buffer, list.starts[i]!, list.ends[i]!);
  }

  uint32Field(): number {
    this.expect(WireType.Varint);
    return this.uint32();
  }

  boolField(): boolean {
    this.expect(WireType.Varint);
    return this.bool();
  }

  /** int32Fields appends one value, or a packed run of them. */
  int32Fields(into: number[]): void {
    if (this.wireType === WireType.Varint) {
      into.push(this.int32());
      return;
    }
    this.expect(WireType.LengthDelimited);
    const end = this.uint32() + this.pos;
    if (end > this.len) throw new RangeError("premature EOF");
    while (this.pos < end) {
      this.count();
      into.push(this.int32());
    }
    if (this.pos !== end) throw new RangeError("packed field overruns its length");
  }

  private expect(wireType: WireType): void {
    if (this.wireType !== wireType) throw new Error(`wire type ${this.wireType} where the field has ${wireType}`);
  }
}
