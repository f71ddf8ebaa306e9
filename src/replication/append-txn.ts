import { BinaryReader, BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import { bytesField, firstOf } from "./etcd-wire.js";
import type { Append, AppendAnswer, EtcdUnary, LogAppend } from "./log-append.js";

/**
 * An append's KV.Txn in etcd's wire format (api/etcdserverpb/rpc.proto),
 * written and read field by field with protobuf-es's wire primitives.
 * Why not its reflective codec (a registry, as test/support/etcd-schema.ts
 * builds one): the message objects and the walk over their descriptors
 * cost the HA leader more per append than the fields themselves
 * (docs/performance.md); test/unit/replication/etcd-txn-wire.test.ts holds
 * both ways to the same bytes and answers.
 */

/** unaryAppend is LogAppend as one KV.Txn sent by `txn` (a lean gRPC client of etcd: bench/probes/etcd-append.ts measured etcd3's stack at about twice its CPU per append). */
export function unaryAppend(txn: EtcdUnary): LogAppend {
  return async (append, options) => decodeAppendAnswer(await txn(encodeAppendTxn(append), options));
}

/** encodeAppendTxn is the TxnRequest of an append: compare the fence's create_revision and the entry's version (0: absent), put the entry, else read both keys. */
export function encodeAppendTxn({ fence, key, value }: Append): Uint8Array {
  if (fence.target !== "Create" || fence.result !== "Equal") throw new TypeError("a fence compares a key's create_revision for equality");
  const w = new BinaryWriter();
  // compare (1): Compare { result EQUAL (0, left out), target CREATE (1), key (3), create_revision (5) }
  bytesField(w.tag(1, WireType.LengthDelimited).fork().tag(2, WireType.Varint).int32(1), 3, fence.key);
  w.tag(5, WireType.Varint).int64(fence.create_revision).join();
  // compare (1): Compare { target VERSION (0), key (3), version (4) = 0: a oneof's member is written even at 0 }
  bytesField(w.tag(1, WireType.LengthDelimited).fork(), 3, key).tag(4, WireType.Varint).int64(0).join();
  // success (2): RequestOp { request_put (2): PutRequest { key (1), value (2) } }
  bytesField(bytesField(w.tag(2, WireType.LengthDelimited).fork().tag(2, WireType.LengthDelimited).fork(), 1, key), 2, value)
    .join()
    .join();
  // failure (3): RequestOp { request_range (1): RangeRequest { key (1) } }, for the fenced key, then the entry
  for (const read of [fence.key, key]) bytesField(w.tag(3, WireType.LengthDelimited).fork().tag(1, WireType.LengthDelimited).fork(), 1, read).join().join();
  return w.finish();
}

/** decodeAppendAnswer reads an append's TxnResponse: succeeded (2), else its two ranges' first key's create_revision (the fence's term) and whether the entry exists. */
export function decodeAppendAnswer(bytes: Uint8Array): AppendAnswer {
  const r = new BinaryReader(bytes);
  let succeeded = false;
  const firsts: (string | undefined)[] = [];
  while (r.pos < r.len) {
    const [field, wire] = r.tag();
    if (field === 2 && wire === WireType.Varint) succeeded = r.bool();
    else if (field === 3 && wire === WireType.LengthDelimited) firsts.push(firstRevision(r.bytes()));
    else r.skip(wire);
  }
  if (succeeded) return { succeeded: true, leaderRevision: undefined, entryExists: false };
  return { succeeded: false, leaderRevision: firsts[0], entryExists: firsts[1] !== undefined };
}

/** firstRevision reads a ResponseOp: its response_range's (1) first KeyValue's (kvs, 2) create_revision (2), undefined when it has none. */
function firstRevision(op: Uint8Array): string | undefined {
  const range = firstOf(op, 1);
  const kv = range === undefined ? undefined : firstOf(range, 2);
  if (kv === undefined) return undefined;
  const r = new BinaryReader(kv);
  let revision = "0";
  while (r.pos < r.len) {
    const [field, wire] = r.tag();
    if (field === 2 && wire === WireType.Varint) revision = r.int64().toString();
    else r.skip(wire);
  }
  return revision;
}
