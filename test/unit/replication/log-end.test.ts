import { create, type DescMessage, fromBinary, toBinary } from "@bufbuild/protobuf";
import { FieldDescriptorProto_Type as Type } from "@bufbuild/protobuf/wkt";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { decodeLastKey, encodeLogEndTxn } from "../../../src/replication/log-end.js";
import { etcdRegistry, etcdField as field, etcdMessage as message } from "../../support/etcd-schema.js";

// etcd's KV.Txn messages as protobuf-es reads them, with the RangeRequest fields a standby's question sets and the
// answer's fields it does not read (headers, a KeyValue's other fields, put responses), which the hand-read answer skips.
const registry = etcdRegistry(
  "etcd-log-end-reference",
  [
    message("RangeRequest", [
      field("key", 1, Type.BYTES),
      field("range_end", 2, Type.BYTES),
      field("limit", 3, Type.INT64),
      field("sort_order", 5, Type.INT32),
      field("sort_target", 6, Type.INT32),
      field("keys_only", 8, Type.BOOL),
    ]),
    message("RequestOp", [field("request_range", 1, ".etcdserverpb.RangeRequest", { oneof: 0 })], ["request"]),
    message("TxnRequest", [field("success", 2, ".etcdserverpb.RequestOp", { repeated: true })]),
    message("ResponseHeader", [field("cluster_id", 1, Type.UINT64), field("revision", 3, Type.INT64)]),
    message("KeyValue", [field("key", 1, Type.BYTES), field("create_revision", 2, Type.INT64), field("value", 5, Type.BYTES)]),
    message("RangeResponse", [
      field("header", 1, ".etcdserverpb.ResponseHeader"),
      field("kvs", 2, ".etcdserverpb.KeyValue", { repeated: true }),
      field("more", 3, Type.BOOL),
      field("count", 4, Type.INT64),
    ]),
    message("PutResponse", [field("header", 1, ".etcdserverpb.ResponseHeader")]),
    message(
      "ResponseOp",
      [field("response_range", 1, ".etcdserverpb.RangeResponse", { oneof: 0 }), field("response_put", 2, ".etcdserverpb.PutResponse", { oneof: 0 })],
      ["response"],
    ),
    message("TxnResponse", [
      field("header", 1, ".etcdserverpb.ResponseHeader"),
      field("succeeded", 2, Type.BOOL),
      field("responses", 3, ".etcdserverpb.ResponseOp", { repeated: true }),
    ]),
  ],
  [],
);
const TxnRequest = registry.getMessage("etcdserverpb.TxnRequest") as DescMessage;
const TxnResponse = registry.getMessage("etcdserverpb.TxnResponse") as DescMessage;

const bytes = fc.uint8Array({ minLength: 0, maxLength: 300 });
const header = fc.record({ clusterId: fc.bigInt({ min: 0n, max: (1n << 64n) - 1n }), revision: fc.bigInt({ min: 1n, max: (1n << 63n) - 1n }) });
const keyValue = fc.record({ key: bytes, createRevision: fc.bigInt({ min: 1n, max: 1n << 40n }), value: bytes });

describe("a standby's question of the log's end, as a KV.Txn on the wire", () => {
  it("is the request protobuf-es writes for it, byte for byte: the last key of the range, keys only", () => {
    fc.assert(
      fc.property(bytes, bytes, (key, rangeEnd) => {
        const expected = create(TxnRequest, {
          success: [{ request: { case: "requestRange", value: { key, rangeEnd, limit: 1n, sortOrder: 2, sortTarget: 0, keysOnly: true } } }],
        } as never);
        expect(Buffer.from(encodeLogEndTxn(key, rangeEnd))).toEqual(Buffer.from(toBinary(TxnRequest, expected)));
      }),
    );
  });

  it("reads the first key of the answer's first range as protobuf-es reads it, past the fields it does not use", () => {
    const range = fc.record({ header, kvs: fc.array(keyValue, { maxLength: 2 }), more: fc.boolean(), count: fc.bigInt({ min: 0n, max: 5n }) });
    const answer = fc.record({
      header,
      succeeded: fc.boolean(),
      responses: fc.array(
        fc.oneof(
          range.map((value) => ({ response: { case: "responseRange" as const, value } })),
          header.map((h) => ({ response: { case: "responsePut" as const, value: { header: h } } })),
        ),
        { maxLength: 2 },
      ),
    });
    fc.assert(
      fc.property(answer, (init) => {
        const wire = toBinary(TxnResponse, create(TxnResponse, init as never));
        const read = fromBinary(TxnResponse, wire) as unknown as typeof init;
        const op = read.responses[0]?.response;
        const expected = op?.case === "responseRange" ? op.value.kvs[0]?.key : undefined;
        const got = decodeLastKey(wire);
        expect(got === undefined ? undefined : Buffer.from(got)).toEqual(expected === undefined ? undefined : Buffer.from(expected));
      }),
    );
  });
});
