import { create, type DescField, type DescMessage, ScalarType, toBinary } from "@bufbuild/protobuf";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { GetStatsResponseSchema, MetadataService } from "../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { encodeFramed } from "../../src/client/flat-encoder.js";

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
