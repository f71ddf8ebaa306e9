import { create, type DescMessage, toBinary } from "@bufbuild/protobuf";
import { FieldDescriptorProto_Type as Type } from "@bufbuild/protobuf/wkt";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { decodeAuthenticateToken, encodeAuthenticate } from "../../../src/replication/etcd-authenticate.js";
import { etcdRegistry, etcdField as field, etcdMessage as message } from "../../support/etcd-schema.js";

// etcd's Auth.Authenticate messages as protobuf-es reads them, the response with its header, which the token's reader skips.
const registry = etcdRegistry(
  "etcd-authenticate-reference",
  [
    message("AuthenticateRequest", [field("name", 1, Type.STRING), field("password", 2, Type.STRING)]),
    message("ResponseHeader", [field("cluster_id", 1, Type.UINT64), field("member_id", 2, Type.UINT64), field("revision", 3, Type.INT64)]),
    message("AuthenticateResponse", [field("header", 1, ".etcdserverpb.ResponseHeader"), field("token", 2, Type.STRING)]),
  ],
  [],
);
const AuthenticateRequest = registry.getMessage("etcdserverpb.AuthenticateRequest") as DescMessage;
const AuthenticateResponse = registry.getMessage("etcdserverpb.AuthenticateResponse") as DescMessage;

const text = fc.string({ unit: "grapheme", maxLength: 40 });
const u64 = fc.bigInt({ min: 0n, max: (1n << 64n) - 1n });

describe("etcd's Auth.Authenticate on the wire", () => {
  it("is the request protobuf-es writes for a user and password, byte for byte (empty ones too)", () => {
    fc.assert(
      fc.property(text, text, (name, password) => {
        const expected = toBinary(AuthenticateRequest, create(AuthenticateRequest, { name, password } as never));
        expect(Buffer.from(encodeAuthenticate(name, password))).toEqual(Buffer.from(expected));
      }),
    );
  });

  it("reads the token of the answer protobuf-es writes, past its header", () => {
    fc.assert(
      fc.property(text, u64, u64, (token, clusterId, memberId) => {
        const wire = toBinary(AuthenticateResponse, create(AuthenticateResponse, { header: { clusterId, memberId, revision: 7n }, token } as never));
        expect(decodeAuthenticateToken(wire)).toBe(token);
      }),
    );
  });
});
