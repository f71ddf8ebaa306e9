import { create, type DescMessage, equals, fromBinary, type MessageInitShape, toBinary } from "@bufbuild/protobuf";
import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  AllocationStatus,
  BatchAllocateRequestSchema,
  BatchAllocateResponseSchema,
  type BatchExistsRequest,
  BatchExistsRequestSchema,
  BatchExistsResponseSchema,
  BatchRequestSchema,
  BatchResponseSchema,
  ConfirmWriteRequestSchema,
  ConfirmWriteResponseSchema,
  DeleteKeysRequestSchema,
  GetLocationsRequestSchema,
  GetLocationsResponseSchema,
  Reason,
} from "../../../gen/hf3fs/metadata/v1/metadata_pb.js";
import type { MetadataError } from "../../../src/core/errors.js";
import { KeyList } from "../../../src/core/key-list.js";
import { BATCH_CODECS } from "../../../src/framing/grpc/batch-codecs.js";
import { keepLeadingByteOrderMark } from "../../../src/framing/http/utf8-text.js";
import { type KeyBytesMessage, keysOf } from "../../../src/service/key-bytes.js";
import { checkMessageEntries } from "../../../src/service/message-entries.js";

// As the server does: protobuf-es then keeps a leading U+FEFF, as the batch codecs do.
keepLeadingByteOrderMark();

// Strings from every plane, lone surrogates included (they encode as U+FFFD).
const text = fc.string({ unit: "binary", maxLength: 80 });
const texts = fc.array(text, { maxLength: 12 });
const uint32 = fc.nat({ max: 0xffff_ffff });
const int32s = fc.array(fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }), { maxLength: 12 });

/** Each method's request schema, with an arbitrary of its init shape. */
/** NO_LIMIT lets every test message through the entry limit. */
const NO_LIMIT = Number.MAX_SAFE_INTEGER;

const REQUESTS = {
  BatchAllocate: {
    schema: BatchAllocateRequestSchema,
    init: fc.record({ namespace: text, rank: uint32, keys: texts, prefixKeys: texts }),
  },
  ConfirmWrite: {
    schema: ConfirmWriteRequestSchema,
    init: fc.record({ namespace: text, rank: uint32, keys: texts, pages: int32s, pagesToRelease: int32s, keysToRelease: texts }),
  },
  BatchExists: {
    schema: BatchExistsRequestSchema,
    init: fc.record(
      { namespace: text, keys: texts, rank: fc.option(uint32, { nil: undefined }), callerRank: fc.option(uint32, { nil: undefined }) },
      { requiredKeys: ["namespace", "keys"] },
    ),
  },
  GetLocations: {
    schema: GetLocationsRequestSchema,
    init: fc.record({ namespace: text, rank: uint32, keys: texts, includeIncomplete: fc.boolean() }),
  },
} as const;

/** BATCHED are a Batch's cases, each with its method in the tables here. */
const BATCHED = [
  ["batchAllocate", "BatchAllocate"],
  ["confirmWrite", "ConfirmWrite"],
  ["batchExists", "BatchExists"],
  ["getLocations", "GetLocations"],
] as const;

/** batchOf is an arbitrary Batch message of `table`'s messages (a call or result of no case included), and `more` cases. */
function batchOf(field: string, table: Record<string, { init: fc.Arbitrary<unknown> }>, more: fc.Arbitrary<unknown>[] = []) {
  const one = fc.oneof(
    fc.constant({ case: undefined }),
    ...BATCHED.map(([name, method]) => table[method]!.init.map((value) => ({ case: name, value }))),
    ...more,
  );
  return fc.record({
    [field]: fc.array(
      one.map((v) => ({ [field === "calls" ? "call" : "result"]: v })),
      { maxLength: 4 },
    ),
  });
}

const ALL_REQUESTS = { ...REQUESTS, Batch: { schema: BatchRequestSchema, init: batchOf("calls", REQUESTS) } };

const RESPONSES = {
  BatchAllocate: {
    schema: BatchAllocateResponseSchema,
    init: fc.record({
      pages: int32s,
      statuses: fc.array(fc.constantFrom(...Object.values(AllocationStatus).filter((v) => typeof v === "number")), { maxLength: 12 }),
    }),
  },
  ConfirmWrite: {
    schema: ConfirmWriteResponseSchema,
    init: fc.record({ confirmed: uint32, released: uint32, completed: fc.array(uint32, { maxLength: 12 }) }),
  },
  BatchExists: { schema: BatchExistsResponseSchema, init: fc.record({ exists: fc.array(fc.boolean(), { maxLength: 12 }) }) },
  GetLocations: { schema: GetLocationsResponseSchema, init: fc.record({ pages: int32s }) },
} as const;

const CALL_ERROR = fc.record({
  code: fc.integer({ min: -1, max: 20 }),
  message: text,
  info: fc.option(fc.record({ reason: fc.constantFrom(Reason.UNSPECIFIED, Reason.NOT_LEADER), namespace: text, rank: fc.option(uint32, { nil: undefined }) }), {
    nil: undefined,
  }),
});
const ALL_RESPONSES = {
  ...RESPONSES,
  Batch: { schema: BatchResponseSchema, init: batchOf("results", RESPONSES, [CALL_ERROR.map((value) => ({ case: "error", value }))]) },
};

const METHODS = Object.keys(ALL_REQUESTS) as (keyof typeof ALL_REQUESTS)[];

/** decodesLike asserts that the hand-written codec and protobuf-es agree on bytes: the same message, or both refuse them. */
function decodesLike(method: keyof typeof ALL_REQUESTS, bytes: Uint8Array): void {
  const schema: DescMessage = ALL_REQUESTS[method].schema;
  let expected: ReturnType<typeof fromBinary> | Error;
  try {
    expected = fromBinary(schema, bytes);
  } catch (e) {
    expected = e as Error;
  }
  const decode = () => BATCH_CODECS[method]!.decode(Buffer.from(bytes), NO_LIMIT);
  if (expected instanceof Error) {
    expect(decode).toThrow();
    return;
  }
  const actual = decode() as typeof expected;
  expect(equals(schema, actual, expected), `${method}: ${JSON.stringify(actual)} vs ${JSON.stringify(expected)}`).toBe(true);
}

describe("the hand-written codecs of the cycle's messages", () => {
  it("cover every field of their messages (a new field in the contract must be added to src/framing/grpc/batch-codecs.ts)", () => {
    const fieldsOf = (schema: DescMessage) => schema.fields.map((f) => `${f.number} ${f.name}`);
    const batched = (schema: DescMessage) => fieldsOf(schema.fields[0]!.message!);
    expect(batched(BatchRequestSchema)).toEqual(["1 batch_allocate", "2 confirm_write", "3 batch_exists", "4 get_locations"]);
    expect(batched(BatchResponseSchema)).toEqual(["1 batch_allocate", "2 confirm_write", "3 batch_exists", "4 get_locations", "15 error"]);
    expect(Object.fromEntries(METHODS.map((m) => [m, [fieldsOf(ALL_REQUESTS[m].schema), fieldsOf(ALL_RESPONSES[m].schema)]]))).toEqual({
      BatchAllocate: [
        ["1 namespace", "2 rank", "3 keys", "4 prefix_keys"],
        ["1 pages", "2 statuses"],
      ],
      ConfirmWrite: [
        ["1 namespace", "2 rank", "3 keys", "4 pages", "5 pages_to_release", "6 keys_to_release"],
        ["1 confirmed", "2 released", "3 completed"],
      ],
      BatchExists: [["1 namespace", "2 keys", "3 rank", "4 caller_rank"], ["1 exists"]],
      GetLocations: [["1 namespace", "2 rank", "3 keys", "4 include_incomplete"], ["1 pages"]],
      Batch: [["1 calls"], ["1 results"]],
    });
  });

  it.each(METHODS)("decode %s requests as protobuf-es does", (method) => {
    const { schema, init } = ALL_REQUESTS[method];
    fc.assert(
      fc.property(init, (message) => decodesLike(method, toBinary(schema as DescMessage, create(schema as DescMessage, message as never)))),
      { numRuns: 300 },
    );
  });

  it.each(METHODS)("decode every prefix of a %s request as protobuf-es does (truncated input is refused)", (method) => {
    const { schema, init } = ALL_REQUESTS[method];
    fc.assert(
      fc.property(init, (message) => {
        const bytes = toBinary(schema as DescMessage, create(schema as DescMessage, message as never));
        for (let length = 0; length < bytes.length; length++) decodesLike(method, bytes.subarray(0, length));
      }),
      { numRuns: 50 },
    );
  });

  it("accept what other encoders may send: any field order, repeats, unpacked int32s, unknown fields", () => {
    const writer = new BinaryWriter();
    writer.tag(99, WireType.Varint).uint32(7); // unknown, each wire type
    writer.tag(98, WireType.LengthDelimited).bytes(new Uint8Array([1, 2, 3]));
    writer.tag(97, WireType.Bit32).fixed32(1);
    writer.tag(96, WireType.Bit64).fixed64(1n);
    writer.tag(4, WireType.Varint).int32(-5); // pages, unpacked
    writer.tag(3, WireType.LengthDelimited).string("b");
    writer.tag(2, WireType.Varint).uint32(1); // rank, then again: the last wins
    writer
      .tag(4, WireType.LengthDelimited)
      .fork()
      .int32(6)
      .int32(-(2 ** 31))
      .join(); // pages, packed
    writer.tag(1, WireType.LengthDelimited).string("ns");
    writer.tag(3, WireType.LengthDelimited).string("a");
    writer.tag(2, WireType.Varint).uint32(3);
    writer.tag(5, WireType.Varint).int32(9);
    const bytes = writer.finish();
    decodesLike("ConfirmWrite", bytes);
    expect(BATCH_CODECS.ConfirmWrite!.decode(Buffer.from(bytes), NO_LIMIT)).toMatchObject({
      namespace: "ns",
      rank: 3,
      keys: ["b", "a"],
      pages: [-5, 6, -(2 ** 31)],
      pagesToRelease: [9],
    });
  });

  it("hand the core each key as a view of the request's bytes, and strings only when read", () => {
    const bytes = Buffer.from(toBinary(BatchExistsRequestSchema, create(BatchExistsRequestSchema, { keys: ["k1", "ключ"] })));
    const message = BATCH_CODECS.BatchExists!.decode(bytes, NO_LIMIT) as BatchExistsRequest;
    const keys = keysOf(message, "keys");
    if (!(keys instanceof KeyList)) throw new Error("the codec left no KeyList");
    expect(keys.bytes).toBe(bytes);
    expect([keys.key(0), keys.key(1), keys.byteLength(1)]).toEqual(["k1", "ключ", 8]);
    expect(message.keys).toEqual(["k1", "ключ"]);
  });

  it("keep a leading U+FEFF, as protobuf-es does once the server configured it", () => {
    const bytes = toBinary(BatchExistsRequestSchema, create(BatchExistsRequestSchema, { namespace: "\uFEFF", keys: ["\uFEFFk", "\uFEFF\uFEFF"] }));
    expect(BATCH_CODECS.BatchExists!.decode(Buffer.from(bytes), NO_LIMIT)).toMatchObject({ namespace: "\uFEFF", keys: ["\uFEFFk", "\uFEFF\uFEFF"] });
    decodesLike("BatchExists", bytes);
  });

  it("refuse invalid UTF-8 in a key, accept U+FFFD that is really there", () => {
    const key = (bytes: number[]) => new Uint8Array([0x1a, bytes.length, ...bytes]);
    expect(() => BATCH_CODECS.BatchAllocate!.decode(Buffer.from(key([0x61, 0xff, 0x62])), NO_LIMIT)).toThrow();
    expect(() => BATCH_CODECS.BatchAllocate!.decode(Buffer.from(key([0xed, 0xa0, 0x80])), NO_LIMIT)).toThrow(); // an encoded surrogate
    expect(BATCH_CODECS.BatchAllocate!.decode(Buffer.from(key([0xef, 0xbf, 0xbd])), NO_LIMIT)).toMatchObject({ keys: ["\uFFFD"] });
  });

  it("refuse a known field with the wrong wire type", () => {
    expect(() => BATCH_CODECS.BatchExists!.decode(Buffer.from([0x0d, 1, 2, 3, 4]), NO_LIMIT)).toThrow(/wire type/); // namespace as fixed32
  });

  it.each(METHODS)("encode %s responses that protobuf-es reads back, byte for byte as it writes them", (method) => {
    const { schema, init } = ALL_RESPONSES[method];
    fc.assert(
      fc.property(init, (message) => {
        const expected = toBinary(schema as DescMessage, create(schema as DescMessage, message as MessageInitShape<DescMessage>));
        const frame = BATCH_CODECS[method]!.frame(message);
        expect(frame[0]).toBe(0);
        expect(frame.readUInt32BE(1)).toBe(frame.length - 5);
        expect(frame.subarray(5).equals(Buffer.from(expected))).toBe(true);
      }),
      { numRuns: 300 },
    );
  });

  it("stop at the entry limit, in repeated strings, packed and unpacked numbers alike", () => {
    const limitOf = (decode: () => unknown) => {
      try {
        decode();
        return undefined;
      } catch (e) {
        return (e as MetadataError).reason;
      }
    };
    const confirm = (keys: number, pages: number) =>
      Buffer.from(
        toBinary(
          ConfirmWriteRequestSchema,
          create(ConfirmWriteRequestSchema, { keys: Array.from({ length: keys }, (_, i) => `k${i}`), pages: Array(pages).fill(1) }),
        ),
      );
    // An entry is a field, or a value of a packed run: 2 keys, and pages [1] (a field and a value), are 4.
    expect(limitOf(() => BATCH_CODECS.ConfirmWrite!.decode(confirm(2, 1), 4))).toBeUndefined();
    expect(limitOf(() => BATCH_CODECS.ConfirmWrite!.decode(confirm(5, 0), 4))).toBe(Reason.LIMIT_EXCEEDED);
    expect(limitOf(() => BATCH_CODECS.ConfirmWrite!.decode(confirm(0, 4), 4))).toBe(Reason.LIMIT_EXCEEDED);
    const unpacked = new BinaryWriter();
    for (let i = 0; i < 5; i++) unpacked.tag(4, WireType.Varint).int32(i);
    expect(limitOf(() => BATCH_CODECS.ConfirmWrite!.decode(Buffer.from(unpacked.finish()), 4))).toBe(Reason.LIMIT_EXCEEDED);
    // The other methods are counted before protobuf-es decodes them.
    const deleteKeys = (n: number) =>
      toBinary(DeleteKeysRequestSchema, create(DeleteKeysRequestSchema, { keys: Array.from({ length: n }, (_, i) => `k${i}`) }));
    expect(() => checkMessageEntries(DeleteKeysRequestSchema, deleteKeys(4), 4)).not.toThrow();
    expect(limitOf(() => checkMessageEntries(DeleteKeysRequestSchema, deleteKeys(5), 4))).toBe(Reason.LIMIT_EXCEEDED);
    expect(limitOf(() => checkMessageEntries(ConfirmWriteRequestSchema, confirm(0, 4), 4))).toBe(Reason.LIMIT_EXCEEDED);
    expect(() => checkMessageEntries(ConfirmWriteRequestSchema, confirm(2, 1), 4)).not.toThrow();
    // A Batch's calls count together: a field for each call, one for its case, then the call's own (namespace empty: none).
    const batch = (calls: number) =>
      Buffer.from(
        toBinary(
          BatchRequestSchema,
          create(BatchRequestSchema, { calls: Array.from({ length: calls }, () => ({ call: { case: "batchExists" as const, value: { keys: ["a", "b"] } } })) }),
        ),
      );
    expect(limitOf(() => BATCH_CODECS.Batch!.decode(batch(2), 8))).toBeUndefined();
    expect(limitOf(() => BATCH_CODECS.Batch!.decode(batch(3), 8))).toBe(Reason.LIMIT_EXCEEDED);
    expect(limitOf(() => BATCH_CODECS.Batch!.decode(batch(3), 12))).toBeUndefined();
  });

  it("release the keys of a Batch's calls with the Batch", () => {
    const bytes = Buffer.from(toBinary(BatchRequestSchema, create(BatchRequestSchema, { calls: [{ call: { case: "batchExists", value: { keys: ["k"] } } }] })));
    const batch = BATCH_CODECS.Batch!.decode(bytes, NO_LIMIT) as KeyBytesMessage & { calls: { call: { value: BatchExistsRequest } }[] };
    const call = batch.calls[0]!.call.value;
    expect(keysOf(call, "keys")).toBeInstanceOf(KeyList);
    batch.release();
    expect(() => keysOf(call, "keys")).toThrow(/after its call ended/);
  });
});
