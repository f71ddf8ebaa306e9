import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import type { CallOptions } from "@grpc/grpc-js";
import type { Etcd3 } from "etcd3";
import type { ClusterKeys } from "./cluster-keys.js";
import { bytesField, firstOf } from "./etcd-wire.js";
import type { EtcdUnary } from "./log-append.js";

/**
 * LogEnd asks etcd, in a linearizable read, for the log's last entry at
 * or past entry `from`: its sequence number, or undefined when the log has
 * none there. A standby asks it every half of its read lag while reads
 * come (StandbyReads); it fails with etcd3's error types.
 */
export type LogEnd = (from: number, options: CallOptions) => Promise<number | undefined>;

/** etcd3LogEnd is LogEnd through the etcd3 client's KV.Range. */
export function etcd3LogEnd(client: Etcd3, keys: ClusterKeys): LogEnd {
  return async (from, options) => {
    const res = await client.kv.range(
      { key: keys.logEntry(from), range_end: keys.logEnd, sort_order: "Descend", sort_target: "Key", limit: 1, keys_only: true },
      options,
    );
    return res.kvs.length === 0 ? undefined : keys.seqOf(res.kvs[0]!.key);
  };
}

/**
 * unaryLogEnd is LogEnd as a KV.Txn of that one range, sent by `txn` (the
 * lean client of the leader's appends: through etcd3's stack a question
 * cost a standby about a quarter more CPU, docs/performance.md). A Txn
 * that only reads is a linearizable read in etcd, as the range alone is,
 * not an entry in its raft log.
 */
export function unaryLogEnd(txn: EtcdUnary, keys: ClusterKeys): LogEnd {
  return async (from, options) => {
    const key = decodeLastKey(await txn(encodeLogEndTxn(keys.logEntry(from), keys.logEnd), options));
    return key === undefined ? undefined : keys.seqOf(Buffer.from(key.buffer, key.byteOffset, key.length));
  };
}

/** RANGE_DESCEND is RangeRequest.SortOrder DESCEND; its sort target KEY is 0, left out. */
const RANGE_DESCEND = 2;

/** encodeLogEndTxn is the TxnRequest of no compare whose one success op reads the last key of [key, rangeEnd): keys only, sorted by key descending, limit 1. */
export function encodeLogEndTxn(key: Uint8Array, rangeEnd: Uint8Array): Uint8Array {
  const w = new BinaryWriter();
  // success (2): RequestOp { request_range (1): RangeRequest { key (1), range_end (2), limit (3), sort_order (5), keys_only (8) } }
  const range = bytesField(bytesField(w.tag(2, WireType.LengthDelimited).fork().tag(1, WireType.LengthDelimited).fork(), 1, key), 2, rangeEnd);
  range.tag(3, WireType.Varint).int64(1).tag(5, WireType.Varint).int32(RANGE_DESCEND).tag(8, WireType.Varint).bool(true).join().join();
  return w.finish();
}

/** decodeLastKey reads a TxnResponse's first op's range (responses 3, response_range 1) for its first KeyValue's key (kvs 2, key 1); undefined when it has none. */
export function decodeLastKey(bytes: Uint8Array): Uint8Array | undefined {
  const op = firstOf(bytes, 3);
  const range = op === undefined ? undefined : firstOf(op, 1);
  const kv = range === undefined ? undefined : firstOf(range, 2);
  return kv === undefined ? undefined : (firstOf(kv, 1) ?? new Uint8Array());
}
