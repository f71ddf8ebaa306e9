import { create, type DescMessage, toBinary } from "@bufbuild/protobuf";
import { FieldDescriptorProto_Type as Type } from "@bufbuild/protobuf/wkt";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { decodeKeepAliveTtl, encodeKeepAlive, unaryKeepAlives } from "../../../src/replication/lease-keep-alive.js";
import { within } from "../../../src/replication/within.js";
import { etcdRegistry, etcdField as field, etcdMessage as message } from "../../support/etcd-schema.js";

// etcd's Lease.LeaseKeepAlive messages as protobuf-es reads them, the response with its header and ID, which the TTL's reader skips.
const registry = etcdRegistry(
  "lease-keep-alive-reference",
  [
    message("LeaseKeepAliveRequest", [field("ID", 1, Type.INT64)]),
    message("ResponseHeader", [field("cluster_id", 1, Type.UINT64), field("member_id", 2, Type.UINT64), field("revision", 3, Type.INT64)]),
    message("LeaseKeepAliveResponse", [field("header", 1, ".etcdserverpb.ResponseHeader"), field("ID", 2, Type.INT64), field("TTL", 3, Type.INT64)]),
  ],
  [],
);
const Request = registry.getMessage("etcdserverpb.LeaseKeepAliveRequest") as DescMessage;
const Response = registry.getMessage("etcdserverpb.LeaseKeepAliveResponse") as DescMessage;

// etcd's lease IDs are positive int64s; TTLs are seconds, 0 or -1 for a lease it no longer has.
const leaseId = fc.bigInt({ min: 1n, max: (1n << 63n) - 1n });
const u64 = fc.bigInt({ min: 0n, max: (1n << 64n) - 1n });

describe("a lease's keep-alive on the wire", () => {
  it("is the request protobuf-es writes for the lease's ID, byte for byte", () => {
    fc.assert(
      fc.property(leaseId, (id) => {
        const expected = toBinary(Request, create(Request, { ID: id } as never));
        expect(Buffer.from(encodeKeepAlive(id.toString()))).toEqual(Buffer.from(expected));
      }),
    );
  });

  it("reads the TTL of the answer protobuf-es writes, past its header and ID (0 when left out)", () => {
    fc.assert(
      fc.property(leaseId, fc.integer({ min: -1, max: 9_000_000_000 }), u64, (id, ttl, clusterId) => {
        const wire = toBinary(Response, create(Response, { header: { clusterId, revision: 7n }, ID: id, TTL: BigInt(ttl) } as never));
        expect(decodeKeepAliveTtl(wire)).toBe(ttl);
      }),
    );
  });
});

describe("a lease's keep-alives as one call each", () => {
  it("send the lease's request and give etcd's TTL; once stopped, they fail, even one answered after", async () => {
    const sent: Uint8Array[] = [];
    let answer = (_: Uint8Array) => {};
    const keepAlives = unaryKeepAlives((request) => {
      sent.push(request);
      return new Promise((resolve) => (answer = resolve));
    }, "7587862232871385861");
    const first = keepAlives.once(within(1_000));
    answer(toBinary(Response, create(Response, { ID: 7587862232871385861n, TTL: 2n } as never)));
    expect(await first).toBe(2);
    expect(Buffer.from(sent[0]!)).toEqual(Buffer.from(encodeKeepAlive("7587862232871385861")));
    const late = keepAlives.once(within(1_000));
    keepAlives.close();
    answer(toBinary(Response, create(Response, { TTL: 2n } as never)));
    await expect(late).rejects.toThrow(/stopped/);
    await expect(keepAlives.once(within(1_000))).rejects.toThrow(/stopped/);
    expect(sent).toHaveLength(2);
  });
});
