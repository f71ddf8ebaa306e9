import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import type { CallOptions } from "@grpc/grpc-js";
import type { Etcd3 } from "etcd3";
import { bytesField } from "./etcd-wire.js";
import type { EtcdUnary } from "./log-append.js";

/**
 * RecordPut writes a member's record to etcd (its key, its value, under
 * `lease` unless undefined): twice a second for every member, so it goes
 * the lean way when the member has a lean client. It fails with etcd3's
 * error types.
 */
export type RecordPut = (key: Buffer, value: Buffer, lease: string | undefined, options: CallOptions) => Promise<void>;

/** etcd3RecordPut is RecordPut through the etcd3 client's KV.Put. */
export function etcd3RecordPut(client: Etcd3): RecordPut {
  return async (key, value, lease, options) => {
    await client.kv.put({ key, value, ...(lease === undefined ? {} : { lease }) }, options);
  };
}

/**
 * unaryRecordPut is RecordPut as a KV.Txn of that one put, sent by `txn`
 * (the lean client of the leader's appends, cheaper per call than etcd3's
 * stack: docs/performance.md). A Txn of no compare always runs its
 * success ops.
 */
export function unaryRecordPut(txn: EtcdUnary): RecordPut {
  return async (key, value, lease, options) => {
    await txn(encodePutTxn(key, value, lease), options);
  };
}

/** encodePutTxn is the TxnRequest of no compare whose one success op puts `value` at `key`, under `lease` (an int64, decimal) unless undefined. */
export function encodePutTxn(key: Uint8Array, value: Uint8Array, lease: string | undefined): Uint8Array {
  const w = new BinaryWriter();
  // success (2): RequestOp { request_put (2): PutRequest { key (1), value (2), lease (3) } }
  const put = bytesField(bytesField(w.tag(2, WireType.LengthDelimited).fork().tag(2, WireType.LengthDelimited).fork(), 1, key), 2, value);
  if (lease !== undefined && lease !== "0") put.tag(3, WireType.Varint).int64(lease);
  put.join().join();
  return w.finish();
}
