import { create, createFileRegistry, type MessageInitShape } from "@bufbuild/protobuf";
import {
  type DescriptorProtoSchema,
  FileDescriptorProtoSchema,
  FieldDescriptorProto_Label as Label,
  FieldDescriptorProto_Type as Type,
} from "@bufbuild/protobuf/wkt";

/**
 * Builders of etcd's messages (api/etcdserverpb/rpc.proto) by etcd's field
 * numbers, as protobuf-es registries: the reference that the tests hold
 * src/replication/append-txn.ts, log-end.ts and etcd-authenticate.ts
 * (etcd's wire format written by hand) to. Fields left out are skipped as
 * unknown.
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
