import { create, type DescMessage, fromBinary, toBinary } from "@bufbuild/protobuf";
import { BinaryReader, BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import {
  type BatchAllocateRequest,
  type BatchAllocateResponse,
  type BatchExistsRequest,
  type BatchExistsResponse,
  type ConfirmWriteRequest,
  type ConfirmWriteResponse,
  type GetLocationsRequest,
  type GetLocationsResponse,
} from "../../gen/hf3fs/metadata/v1/metadata_pb.js";

/** MessageCodec turns a method's request bytes into a message and its answer into bytes. */
export interface MessageCodec {
  decode(bytes: Buffer): unknown;
  /** encode takes a message or an init object of the output type (what a handler returns). */
  encode(message: unknown): Uint8Array;
}

/** reflectiveCodec is protobuf-es's generic codec for a pair of message types: right for any message. */
export function reflectiveCodec(input: DescMessage, output: DescMessage): MessageCodec {
  return {
    decode: (bytes) => fromBinary(input, bytes),
    encode: (message) => toBinary(output, create(output, message as never)),
  };
}

/**
 * BATCH_CODECS are codecs written out by hand, the way protoc plugins
 * generate them, for the four RPCs of the write-and-read cycle, by method
 * name. protobuf-es decodes through reflection, which costs about 180 ns per
 * 64-character key on the bench machine (`bench/protobuf-probe.ts`), as
 * much as the core's work on the key. These read the same wire format with
 * protobuf-es's own BinaryReader and BinaryWriter, accept everything a
 * conforming encoder may send (fields in any order, repeated scalars packed
 * or not, unknown fields, a scalar's last value winning), reject malformed
 * input and invalid UTF-8, and give the same messages as the generic codec;
 * test/server/batch-codecs.test.ts checks that on random messages.
 */
export const BATCH_CODECS: Readonly<Record<string, MessageCodec>> = {
  BatchAllocate: { decode: decodeBatchAllocate, encode: (m) => encodeBatchAllocate(m as BatchAllocateResponse) },
  ConfirmWrite: { decode: decodeConfirmWrite, encode: (m) => encodeConfirmWrite(m as ConfirmWriteResponse) },
  BatchExists: { decode: decodeBatchExists, encode: (m) => encodeBatchExists(m as BatchExistsResponse) },
  GetLocations: { decode: decodeGetLocations, encode: (m) => encodeGetLocations(m as GetLocationsResponse) },
};

function decodeBatchAllocate(bytes: Buffer): BatchAllocateRequest {
  const message: BatchAllocateRequest = { $typeName: "hf3fs.metadata.v1.BatchAllocateRequest", namespace: "", rank: 0, keys: [], prefixKeys: [] };
  const reader = new BinaryReader(bytes);
  while (reader.pos < reader.len) {
    const [field, wireType] = reader.tag();
    if (field === 1) message.namespace = readString(reader, bytes, wireType);
    else if (field === 2) message.rank = readVarint(reader, wireType);
    else if (field === 3) message.keys.push(readString(reader, bytes, wireType));
    else if (field === 4) message.prefixKeys.push(readString(reader, bytes, wireType));
    else reader.skip(wireType, field);
  }
  return message;
}

function decodeConfirmWrite(bytes: Buffer): ConfirmWriteRequest {
  const message: ConfirmWriteRequest = { $typeName: "hf3fs.metadata.v1.ConfirmWriteRequest", namespace: "", rank: 0, keys: [], pages: [], pagesToRelease: [] };
  const reader = new BinaryReader(bytes);
  while (reader.pos < reader.len) {
    const [field, wireType] = reader.tag();
    if (field === 1) message.namespace = readString(reader, bytes, wireType);
    else if (field === 2) message.rank = readVarint(reader, wireType);
    else if (field === 3) message.keys.push(readString(reader, bytes, wireType));
    else if (field === 4) readInt32s(reader, wireType, message.pages);
    else if (field === 5) readInt32s(reader, wireType, message.pagesToRelease);
    else reader.skip(wireType, field);
  }
  return message;
}

function decodeBatchExists(bytes: Buffer): BatchExistsRequest {
  const message: BatchExistsRequest = { $typeName: "hf3fs.metadata.v1.BatchExistsRequest", namespace: "", keys: [] };
  const reader = new BinaryReader(bytes);
  while (reader.pos < reader.len) {
    const [field, wireType] = reader.tag();
    if (field === 1) message.namespace = readString(reader, bytes, wireType);
    else if (field === 2) message.keys.push(readString(reader, bytes, wireType));
    else if (field === 3) message.rank = readVarint(reader, wireType);
    else reader.skip(wireType, field);
  }
  return message;
}

function decodeGetLocations(bytes: Buffer): GetLocationsRequest {
  const message: GetLocationsRequest = { $typeName: "hf3fs.metadata.v1.GetLocationsRequest", namespace: "", rank: 0, keys: [], includeIncomplete: false };
  const reader = new BinaryReader(bytes);
  while (reader.pos < reader.len) {
    const [field, wireType] = reader.tag();
    if (field === 1) message.namespace = readString(reader, bytes, wireType);
    else if (field === 2) message.rank = readVarint(reader, wireType);
    else if (field === 3) message.keys.push(readString(reader, bytes, wireType));
    else if (field === 4) message.includeIncomplete = readBool(reader, wireType);
    else reader.skip(wireType, field);
  }
  return message;
}

function encodeBatchAllocate(message: Partial<BatchAllocateResponse>): Uint8Array {
  const writer = new BinaryWriter();
  writePackedInt32s(writer, 1, message.pages);
  writePackedInt32s(writer, 2, message.statuses);
  return writer.finish();
}

function encodeConfirmWrite(message: Partial<ConfirmWriteResponse>): Uint8Array {
  const writer = new BinaryWriter();
  if (message.confirmed) writer.tag(1, WireType.Varint).uint32(message.confirmed);
  if (message.released) writer.tag(2, WireType.Varint).uint32(message.released);
  const completed = message.completed;
  if (completed !== undefined && completed.length > 0) {
    let length = 0;
    for (const position of completed) length += varintLength(position);
    writer.tag(3, WireType.LengthDelimited).uint32(length);
    for (const position of completed) writer.uint32(position);
  }
  return writer.finish();
}

function encodeBatchExists(message: Partial<BatchExistsResponse>): Uint8Array {
  const writer = new BinaryWriter();
  const exists = message.exists;
  if (exists !== undefined && exists.length > 0) {
    writer.tag(1, WireType.LengthDelimited).uint32(exists.length); // a bool is one byte
    for (const value of exists) writer.bool(value);
  }
  return writer.finish();
}

function encodeGetLocations(message: Partial<GetLocationsResponse>): Uint8Array {
  const writer = new BinaryWriter();
  writePackedInt32s(writer, 1, message.pages);
  return writer.finish();
}

/** writePackedInt32s writes a packed run, its length counted first (BinaryWriter's fork and join copy). */
function writePackedInt32s(writer: BinaryWriter, field: number, values: readonly number[] | undefined): void {
  if (values === undefined || values.length === 0) return;
  let length = 0;
  for (const value of values) length += value < 0 ? 10 : varintLength(value);
  writer.tag(field, WireType.LengthDelimited).uint32(length);
  for (const value of values) writer.int32(value);
}

/** varintLength is the size of a uint32 as a varint; a negative int32 takes 10 bytes (sign-extended to 64 bits). */
function varintLength(value: number): number {
  return value < 0x80 ? 1 : value < 0x4000 ? 2 : value < 0x20_0000 ? 3 : value < 0x1000_0000 ? 4 : 5;
}

const strictUtf8 = new TextDecoder("utf-8", { fatal: true });

/**
 * readString reads a length-delimited UTF-8 string straight from the
 * request's Buffer. Node's decoder puts U+FFFD in place of invalid UTF-8;
 * only then is the strict decoder asked, to reject it as protobuf-es does.
 */
function readString(reader: BinaryReader, bytes: Buffer, wireType: WireType): string {
  expectWireType(wireType, WireType.LengthDelimited);
  const length = reader.uint32();
  const start = reader.pos;
  const end = start + length;
  if (end > reader.len) throw new RangeError("premature EOF");
  reader.pos = end;
  const text = bytes.toString("utf8", start, end);
  if (text.includes("\uFFFD")) strictUtf8.decode(bytes.subarray(start, end));
  return text;
}

/** readVarint reads a uint32. */
function readVarint(reader: BinaryReader, wireType: WireType): number {
  expectWireType(wireType, WireType.Varint);
  return reader.uint32();
}

function readBool(reader: BinaryReader, wireType: WireType): boolean {
  expectWireType(wireType, WireType.Varint);
  return reader.bool();
}

/** readInt32s appends one value or a packed run of them. */
function readInt32s(reader: BinaryReader, wireType: WireType, into: number[]): void {
  if (wireType === WireType.Varint) {
    into.push(reader.int32());
    return;
  }
  expectWireType(wireType, WireType.LengthDelimited);
  const end = reader.uint32() + reader.pos;
  if (end > reader.len) throw new RangeError("premature EOF");
  while (reader.pos < end) into.push(reader.int32());
  if (reader.pos !== end) throw new RangeError("packed field overruns its length");
}

function expectWireType(actual: WireType, expected: WireType): void {
  if (actual !== expected) throw new Error(`wire type ${actual} where the field has ${expected}`);
}
