import { create, createFileRegistry, type DescMessage, type DescService, type MessageInitShape } from "@bufbuild/protobuf";
import {
  type DescriptorProtoSchema,
  FileDescriptorProtoSchema,
  FieldDescriptorProto_Label as Label,
  FieldDescriptorProto_Type as Type,
} from "@bufbuild/protobuf/wkt";

/**
 * The part of etcd's API the log writer's append uses (KV.Txn and the
 * messages it carries, and Auth.Authenticate for etcd's users), by etcd's field numbers (api/etcdserverpb/
 * rpc.proto, api/mvccpb/kv.proto), as a protobuf-es registry made at
 * start: protobuf-es encodes and decodes, and fields left out here (the
 * rest of each message) are skipped as unknown. Compare's enums are
 * int32s, which they are on the wire. test/replication/lean-append.test.ts
 * holds it to a real etcd.
 */

/** field is a field of a message: `type` a scalar's, or a message's name (".etcdserverpb.Name"). */
function field(name: string, number: number, type: Type | string, options: { repeated?: boolean; oneof?: number } = {}) {
  const message = typeof type === "string";
  return {
    name,
    number,
    label: options.repeated ? Label.REPEATED : Label.OPTIONAL,
    type: message ? Type.MESSAGE : type,
    ...(message ? { typeName: type } : {}),
    ...(options.oneof === undefined ? {} : { oneofIndex: options.oneof }),
  };
}

function message(name: string, fields: ReturnType<typeof field>[], oneofs: string[] = []): MessageInitShape<typeof DescriptorProtoSchema> {
  return { name, field: fields, oneofDecl: oneofs.map((n) => ({ name: n })) };
}

const file = create(FileDescriptorProtoSchema, {
  name: "hf3fs-metadata/etcd-txn.proto",
  package: "etcdserverpb",
  syntax: "proto3",
  messageType: [
    // Compare: result (EQUAL 0), target (VERSION 0, CREATE 1), key, target_union; etcd's enums as int32s.
    message(
      "Compare",
      [
        field("result", 1, Type.INT32),
        field("target", 2, Type.INT32),
        field("key", 3, Type.BYTES),
        field("version", 4, Type.INT64, { oneof: 0 }),
        field("create_revision", 5, Type.INT64, { oneof: 0 }),
      ],
      ["target_union"],
    ),
    message("RangeRequest", [field("key", 1, Type.BYTES)]),
    message("PutRequest", [field("key", 1, Type.BYTES), field("value", 2, Type.BYTES)]),
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
    // mvccpb.KeyValue's fields, under this package: a message's name is not on the wire.
    message("KeyValue", [field("key", 1, Type.BYTES), field("create_revision", 2, Type.INT64)]),
    message("RangeResponse", [field("kvs", 2, ".etcdserverpb.KeyValue", { repeated: true })]),
    message("ResponseOp", [field("response_range", 1, ".etcdserverpb.RangeResponse", { oneof: 0 })], ["response"]),
    message("TxnResponse", [field("succeeded", 2, Type.BOOL), field("responses", 3, ".etcdserverpb.ResponseOp", { repeated: true })]),
    message("AuthenticateRequest", [field("name", 1, Type.STRING), field("password", 2, Type.STRING)]),
    message("AuthenticateResponse", [field("token", 2, Type.STRING)]),
  ],
  service: [
    { name: "KV", method: [{ name: "Txn", inputType: ".etcdserverpb.TxnRequest", outputType: ".etcdserverpb.TxnResponse" }] },
    { name: "Auth", method: [{ name: "Authenticate", inputType: ".etcdserverpb.AuthenticateRequest", outputType: ".etcdserverpb.AuthenticateResponse" }] },
  ],
});

const registry = createFileRegistry(file, () => undefined);

/** KV is etcd's KV service with its Txn method alone. */
export const KV = registry.getService("etcdserverpb.KV") as DescService & { method: { txn: DescService["method"][string] & { input: DescMessage } } };

/** Auth is etcd's Auth service with its Authenticate method alone (a user's token, sent as the `token` header of the calls that follow). */
export const Auth = registry.getService("etcdserverpb.Auth") as DescService;
