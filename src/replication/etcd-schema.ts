import { create, createFileRegistry, type DescService, type MessageInitShape } from "@bufbuild/protobuf";
import {
  type DescriptorProtoSchema,
  FileDescriptorProtoSchema,
  FieldDescriptorProto_Label as Label,
  FieldDescriptorProto_Type as Type,
} from "@bufbuild/protobuf/wkt";

/**
 * Parts of etcd's API (api/etcdserverpb/rpc.proto) by etcd's field
 * numbers, as protobuf-es registries made at start: Auth.Authenticate,
 * with which the lean etcd client (src/server/etcd-txn-client.ts) asks
 * for the token of the member's etcd user. Fields left out are skipped as
 * unknown. Tests describe KV.Txn with the same builders, to hold
 * append-txn.ts to protobuf-es.
 */

/** etcdField is a field of a message: `type` a scalar's, or a message's name (".etcdserverpb.Name"). */
export function etcdField(name: string, number: number, type: Type | string, options: { repeated?: boolean; oneof?: number } = {}) {
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

/** etcdMessage is a message of etcd's package: its fields, and the names of its oneofs (a field's `oneof` is an index into them). */
export function etcdMessage(name: string, fields: ReturnType<typeof etcdField>[], oneofs: string[] = []): MessageInitShape<typeof DescriptorProtoSchema> {
  return { name, field: fields, oneofDecl: oneofs.map((n) => ({ name: n })) };
}

/** etcdRegistry is a registry of etcd's package (etcdserverpb) holding `messages` and `services`. */
export function etcdRegistry(
  name: string,
  messages: MessageInitShape<typeof DescriptorProtoSchema>[],
  services: MessageInitShape<typeof FileDescriptorProtoSchema>["service"],
) {
  const file = create(FileDescriptorProtoSchema, {
    name: `hf3fs-metadata/${name}.proto`,
    package: "etcdserverpb",
    syntax: "proto3",
    messageType: messages,
    service: services,
  });
  return createFileRegistry(file, () => undefined);
}

const registry = etcdRegistry(
  "etcd-auth",
  [
    etcdMessage("AuthenticateRequest", [etcdField("name", 1, Type.STRING), etcdField("password", 2, Type.STRING)]),
    etcdMessage("AuthenticateResponse", [etcdField("token", 2, Type.STRING)]),
  ],
  [{ name: "Auth", method: [{ name: "Authenticate", inputType: ".etcdserverpb.AuthenticateRequest", outputType: ".etcdserverpb.AuthenticateResponse" }] }],
);

/** Auth is etcd's Auth service with its Authenticate method alone (a user's token, sent as the `token` header of the calls that follow). */
export const Auth = registry.getService("etcdserverpb.Auth") as DescService;
