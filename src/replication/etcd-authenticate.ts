import { BinaryReader, BinaryWriter, WireType } from "@bufbuild/protobuf/wire";

/**
 * etcd's Auth.Authenticate in its wire format (api/etcdserverpb/rpc.proto),
 * written and read with protobuf-es's wire primitives as the append's
 * transaction is (append-txn.ts): the lean etcd client sends both on the
 * same transport. test/unit/replication/etcd-authenticate.test.ts holds it
 * to protobuf-es's reflective codec.
 */

/** encodeAuthenticate is an AuthenticateRequest: name (1) and password (2), each left out when empty (proto3's default). */
export function encodeAuthenticate(name: string, password: string): Uint8Array {
  const w = new BinaryWriter();
  if (name !== "") w.tag(1, WireType.LengthDelimited).string(name);
  if (password !== "") w.tag(2, WireType.LengthDelimited).string(password);
  return w.finish();
}

/** decodeAuthenticateToken reads an AuthenticateResponse's token (2), "" when it has none; its header (1) is skipped. */
export function decodeAuthenticateToken(bytes: Uint8Array): string {
  const r = new BinaryReader(bytes);
  let token = "";
  while (r.pos < r.len) {
    const [field, wire] = r.tag();
    if (field === 2 && wire === WireType.LengthDelimited) token = r.string();
    else r.skip(wire);
  }
  return token;
}
