import { create, type DescMessage, fromBinary, toBinary } from "@bufbuild/protobuf";
import { FieldDescriptorProto_Type as Type } from "@bufbuild/protobuf/wkt";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { decodeAppendAnswer, encodeAppendTxn } from "../../../src/replication/append-txn.js";
import { decodeLastKey, encodeLogEndTxn } from "../../../src/replication/log-end.js";
import { encodePutTxn } from "../../../src/replication/record-put.js";
import { etcdRegistry, etcdField as field, etcdMessage as message } from "../../support/etcd-schema.js";

// etcd's KV.Txn messages as protobuf-es reads them, with fields the append and a standby's question
// leave out (headers, a KeyValue's other fields, put responses), so that the hand-read answers must skip them.
const registry = etcdRegistry(
  "etcd-txn-reference",
  [
    message(
      "Compare",
      [
        field("result", 1, Type.INT32),
        field("target", 2, Type.INT32),
        field("key", 3, Type.BYTES),
        field("version", 4, Type.INT64, { oneof: 0 }),
        field("create_revision", 5, Type.INT64, { oneof: 0 }),
        field("mod_revision", 6, Type.INT64, { oneof: 0 }),
        field("range_end", 64, Type.BYTES),
      ],
      ["target_union"],
    ),
    message("RangeRequest", [
      field("key", 1, Type.BYTES),
      field("range_end", 2, Type.BYTES),
      field("limit", 3, Type.INT64),
      field("sort_order", 5, Type.INT32),
      field("sort_target", 6, Type.INT32),
      field("keys_only", 8, Type.BOOL),
    ]),
    message("PutRequest", [field("key", 1, Type.BYTES), field("value", 2, Type.BYTES), field("lease", 3, Type.INT64)]),
    message(
      "RequestOp",
      [field("request_range", 1, ".etcdserverpb.RangeRequest", { oneof: 0 }), field("request_put", 2, ".etcdserverpb.PutRequest", { oneof: 0 })],
      ["request"],
    ),
    message("TxnRequest", [
      field("compare", 1, ".etcdserverpb.Compare", { repeated: true }),
      field("success", 2, ".etcdserverpb.RequestOp", { repeated: true }),
      field("failure", 3, ".etcdserverpb.RequestOp", { repeated: true }),
    ]),
    message("ResponseHeader", [
      field("cluster_id", 1, Type.UINT64),
      field("member_id", 2, Type.UINT64),
      field("revision", 3, Type.INT64),
      field("raft_term", 4, Type.UINT64),
    ]),
    message("KeyValue", [
      field("key", 1, Type.BYTES),
      field("create_revision", 2, Type.INT64),
      field("mod_revision", 3, Type.INT64),
      field("version", 4, Type.INT64),
      field("value", 5, Type.BYTES),
      field("lease", 6, Type.INT64),
    ]),
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

const bytes = fc.uint8Array({ minLength: 0, maxLength: 300 }).map((b) => Buffer.from(b));
const revision = fc.bigInt({ min: 1n, max: (1n << 63n) - 1n });
const u64 = fc.bigInt({ min: 0n, max: (1n << 64n) - 1n });
const header = fc.record({ clusterId: u64, memberId: u64, revision, raftTerm: u64 });
const keyValue = fc.record({
  key: bytes,
  createRevision: revision,
  modRevision: revision,
  version: revision,
  value: bytes,
  lease: fc.bigInt({ min: 0n, max: 1n << 40n }),
});
const range = fc.record({ header, kvs: fc.array(keyValue, { maxLength: 2 }), more: fc.boolean(), count: fc.bigInt({ min: 0n, max: 5n }) });
/** answer is a TxnResponse of up to two ops, ranges or puts. */
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

describe("an append's KV.Txn on the wire", () => {
  it("is the request protobuf-es writes for it, byte for byte", () => {
    fc.assert(
      fc.property(bytes, revision, bytes, bytes, (leader, term, key, value) => {
        const fence = { key: leader, target: "Create" as const, result: "Equal" as const, create_revision: term.toString() };
        const expected = create(TxnRequest, {
          compare: [
            { result: 0, target: 1, key: leader, targetUnion: { case: "createRevision", value: term } },
            { result: 0, target: 0, key, targetUnion: { case: "version", value: 0n } },
          ],
          success: [{ request: { case: "requestPut", value: { key, value } } }],
          failure: [{ request: { case: "requestRange", value: { key: leader } } }, { request: { case: "requestRange", value: { key } } }],
        } as never);
        expect(Buffer.from(encodeAppendTxn({ fence, key, value }))).toEqual(Buffer.from(toBinary(TxnRequest, expected)));
      }),
    );
  });

  it("refuses a fence that is not a create_revision's equality", () => {
    const fence = { key: Buffer.from("l"), target: "Mod" as never, result: "Equal" as const, create_revision: "1" };
    expect(() => encodeAppendTxn({ fence, key: Buffer.from("k"), value: Buffer.from("v") })).toThrow(TypeError);
  });

  it("reads the answers protobuf-es reads, past the fields it does not use", () => {
    fc.assert(
      fc.property(answer, (init) => {
        const wire = toBinary(TxnResponse, create(TxnResponse, init as never));
        const read = fromBinary(TxnResponse, wire) as unknown as typeof init;
        const first = (i: number) => {
          const op = read.responses[i]?.response;
          return op?.case === "responseRange" ? op.value.kvs[0] : undefined;
        };
        const expected = read.succeeded
          ? { succeeded: true, leaderRevision: undefined, entryExists: false }
          : { succeeded: false, leaderRevision: first(0)?.createRevision.toString(), entryExists: first(1) !== undefined };
        expect(decodeAppendAnswer(wire)).toEqual(expected);
      }),
    );
  });
});

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

describe("a member's record put as a KV.Txn on the wire", () => {
  it("is the request protobuf-es writes for it, byte for byte, with its lease or none", () => {
    fc.assert(
      fc.property(bytes, bytes, fc.option(fc.bigInt({ min: 1n, max: (1n << 63n) - 1n }), { nil: undefined }), (key, value, lease) => {
        const put = { key, value, ...(lease === undefined ? {} : { lease }) };
        const expected = create(TxnRequest, { success: [{ request: { case: "requestPut", value: put } }] });
        expect(Buffer.from(encodePutTxn(key, value, lease?.toString()))).toEqual(Buffer.from(toBinary(TxnRequest, expected)));
      }),
    );
  });
});
