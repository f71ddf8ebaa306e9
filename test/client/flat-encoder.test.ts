import { create, type DescField, type DescMessage, ScalarType, toBinary } from "@bufbuild/protobuf";
import fc from "fast-check";
import { afterEach, describe, expect, it, vi } from "vitest";
import { BatchAllocateRequestSchema, ConfirmWriteRequestSchema, GetStatsResponseSchema, MetadataService } from "../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { encodeFramed } from "../../src/client/flat-encoder.js";
import { KeyList } from "../../src/core/key-list.js";
import { BATCH_CODECS } from "../../src/framing/grpc/batch-codecs.js";
import type { KeyBytesMessage } from "../../src/service/key-bytes.js";

/** arbitraryOf is an arbitrary value of one field of a flat message: edge values included (empty, zero, negative, multibyte, the largest). */
function arbitraryOf(field: DescField): fc.Arbitrary<unknown> {
  const text = fc.oneof(fc.constant(""), fc.string({ unit: "grapheme", maxLength: 40 }), fc.constant("ключ🔑"));
  const scalar = (type: ScalarType | undefined): fc.Arbitrary<unknown> => {
    if (type === ScalarType.STRING) return text;
    if (type === ScalarType.BOOL) return fc.boolean();
    if (type === ScalarType.UINT32) return fc.oneof(fc.constant(0), fc.constant(4_294_967_295), fc.nat());
    return fc.oneof(fc.constant(0), fc.constant(-1), fc.constant(-2_147_483_648), fc.constant(2_147_483_647), fc.integer());
  };
  if (field.fieldKind === "list" && field.listKind === "message") return fc.array(initOf(field.message), { maxLength: 4 });
  if (field.fieldKind === "message") return initOf(field.message);
  if (field.fieldKind === "list") return fc.array(scalar(field.scalar), { maxLength: 12 });
  if (field.fieldKind === "enum") return fc.constantFrom(...field.enum.values.map((v) => v.number));
  return scalar(field.scalar);
}

/** initOf is an arbitrary init of a message: each field set, or left out (an optional one then stays unset); a oneof one of its cases, or none. */
function initOf(schema: DescMessage): fc.Arbitrary<Record<string, unknown>> {
  const members = schema.members.map((m) => {
    if (m.kind === "field") return [m.localName, arbitraryOf(m)] as const;
    const cases = m.fields.map((f) => arbitraryOf(f).map((value) => ({ case: f.localName, value })));
    return [m.localName, fc.oneof(fc.constant({ case: undefined }), ...cases)] as const;
  });
  return fc.record(Object.fromEntries(members), { requiredKeys: [] });
}

describe("the flat encoder of requests (the relay's, in place of toBinary for speed)", () => {
  it.each(MetadataService.methods.map((m) => [m.input.typeName, m.input] as const))("writes %s exactly as protobuf-es's toBinary does", (_, schema) => {
    fc.assert(
      fc.property(initOf(schema), (init) => {
        const message = create(schema, init);
        const framed = encodeFramed(schema, message);
        const bytes = toBinary(schema, message);
        expect(framed.readUInt32BE(1)).toBe(bytes.length);
        expect(framed[0]).toBe(0);
        expect(Buffer.from(framed.subarray(5)).equals(Buffer.from(bytes))).toBe(true);
      }),
      { numRuns: 300 },
    );
  });

  it("hands a message with nested messages to toBinary, with the same bytes", () => {
    const message = create(GetStatsResponseSchema, { namespaces: [{ namespace: "kv", ranks: [{ rank: 1, numPages: 8 }] }], nextPageToken: "t" });
    expect(Buffer.from(encodeFramed(GetStatsResponseSchema, message).subarray(5)).equals(Buffer.from(toBinary(GetStatsResponseSchema, message)))).toBe(true);
  });
});

/** BYTES_KEPT are the methods whose requests the gRPC fast path decodes with their keys left as bytes (key-bytes.ts). */
const BYTES_KEPT = ["BatchAllocate", "ConfirmWrite", "BatchExists", "GetLocations", "Batch"] as const;

describe("the flat encoder of requests whose keys came as bytes (a relay's, a routing member's)", () => {
  afterEach(() => vi.restoreAllMocks());

  it.each(BYTES_KEPT)("writes a decoded %s request as protobuf-es wrote it, copying its keys without making strings", (method) => {
    const schema = MetadataService.method[(method.charAt(0).toLowerCase() + method.slice(1)) as "batch"].input;
    const toStrings = vi.spyOn(KeyList.prototype, "toStrings");
    fc.assert(
      fc.property(initOf(schema), (init) => {
        const bytes = toBinary(schema, create(schema, init as never));
        const decoded = BATCH_CODECS[method]!.decode(Buffer.from(bytes), Number.MAX_SAFE_INTEGER);
        expect(Buffer.from(encodeFramed(schema, decoded as never).subarray(5)).equals(Buffer.from(bytes))).toBe(true);
      }),
      { numRuns: 300 },
    );
    expect(toStrings).not.toHaveBeenCalled();
  });

  it("writes a part of a request (a shard's keys, KeyBytesMessage.part) as the request of those keys alone", () => {
    fc.assert(
      fc.property(
        fc.array(fc.string({ unit: "grapheme", maxLength: 20 }), { maxLength: 12 }),
        fc.array(fc.boolean(), { minLength: 12, maxLength: 12 }),
        fc.boolean(),
        (keys, picked, prefixed) => {
          const prefixKeys = prefixed ? keys.map((k) => `p${k}`) : [];
          const request = create(BatchAllocateRequestSchema, { namespace: "ns", rank: 3, keys, prefixKeys });
          const decoded = BATCH_CODECS.BatchAllocate!.decode(Buffer.from(toBinary(BatchAllocateRequestSchema, request)), 1_000) as KeyBytesMessage;
          const positions = keys.map((_, i) => i).filter((i) => picked[i]);
          const part = decoded.part(positions, prefixed);
          const expected = create(BatchAllocateRequestSchema, {
            namespace: "ns",
            rank: 3,
            keys: positions.map((i) => keys[i]!),
            prefixKeys: prefixed ? positions.map((i) => prefixKeys[i]!) : [],
          });
          expect(Buffer.from(encodeFramed(BatchAllocateRequestSchema, part as never).subarray(5))).toEqual(
            Buffer.from(toBinary(BatchAllocateRequestSchema, expected)),
          );
        },
      ),
    );
  });

  it("writes a ConfirmWrite part with the fields given in place of the request's", () => {
    const request = create(ConfirmWriteRequestSchema, { namespace: "ns", rank: 1, keys: ["a", "b", "c"], pages: [4, 5, 6], pagesToRelease: [9] });
    const decoded = BATCH_CODECS.ConfirmWrite!.decode(Buffer.from(toBinary(ConfirmWriteRequestSchema, request)), 1_000) as KeyBytesMessage;
    const part = decoded.part([0, 2], false, { pages: [4, 6], pagesToRelease: [] } as never);
    const expected = create(ConfirmWriteRequestSchema, { namespace: "ns", rank: 1, keys: ["a", "c"], pages: [4, 6] });
    expect(Buffer.from(encodeFramed(ConfirmWriteRequestSchema, part as never).subarray(5))).toEqual(Buffer.from(toBinary(ConfirmWriteRequestSchema, expected)));
    // A part's keys are the request's bytes: released with it.
    decoded.release();
    expect(() => encodeFramed(ConfirmWriteRequestSchema, part as never)).toThrow(/after its call ended/);
  });
});
