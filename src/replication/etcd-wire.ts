import { BinaryReader, type BinaryWriter, WireType } from "@bufbuild/protobuf/wire";

/**
 * The field-by-field helpers of the KV.Txn requests members write by hand
 * and the answers they read (append-txn.ts, log-end.ts), in etcd's wire
 * format (api/etcdserverpb/rpc.proto).
 */

/** bytesField writes a bytes field, left out when empty (proto3's default). */
export function bytesField(w: BinaryWriter, field: number, value: Uint8Array): BinaryWriter {
  return value.length === 0 ? w : w.tag(field, WireType.LengthDelimited).bytes(value);
}

/** firstOf is the first value of a message's length-delimited field, undefined when it has none. */
export function firstOf(message: Uint8Array, field: number): Uint8Array | undefined {
  const r = new BinaryReader(message);
  while (r.pos < r.len) {
    const [f, wire] = r.tag();
    if (f === field && wire === WireType.LengthDelimited) return r.bytes();
    r.skip(wire);
  }
  return undefined;
}
