import { create, type DescMessage, toBinary } from "@bufbuild/protobuf";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { batchAllocateFrame, batchExistsFrame, confirmWriteFrame, getLocationsFrame } from "../../bench/harness/request-frames.js";
import {
  BatchAllocateRequestSchema,
  BatchExistsRequestSchema,
  ConfirmWriteRequestSchema,
  GetLocationsRequestSchema,
} from "../../gen/hf3fs/metadata/v1/metadata_pb.js";

const text = fc.string({ unit: "binary", maxLength: 70 });
const texts = fc.array(text, { maxLength: 10 });
const rank = fc.nat({ max: 0xffff_ffff });
const pages = fc.array(fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }), { maxLength: 10 });

/** expectSameBytes asserts that a frame is the gRPC header plus exactly what protobuf-es encodes. */
function expectSameBytes(frame: Buffer, schema: DescMessage, init: object): void {
  const message = toBinary(schema, create(schema, init as never));
  expect(frame.readUInt32BE(1)).toBe(message.length);
  expect(frame[0]).toBe(0);
  expect(frame.subarray(5).equals(Buffer.from(message))).toBe(true);
}

describe("the load client's request frames", () => {
  it("are byte for byte what protobuf-es writes, after the gRPC header", () => {
    fc.assert(
      fc.property(text, rank, texts, texts, pages, (namespace, r, keys, prefixKeys, ps) => {
        expectSameBytes(batchAllocateFrame(namespace, r, keys, prefixKeys), BatchAllocateRequestSchema, { namespace, rank: r, keys, prefixKeys });
        expectSameBytes(confirmWriteFrame(namespace, r, keys, ps), ConfirmWriteRequestSchema, { namespace, rank: r, keys, pages: ps });
        expectSameBytes(batchExistsFrame(namespace, keys), BatchExistsRequestSchema, { namespace, keys });
        expectSameBytes(getLocationsFrame(namespace, r, keys), GetLocationsRequestSchema, { namespace, rank: r, keys });
      }),
      { numRuns: 300 },
    );
  });
});
