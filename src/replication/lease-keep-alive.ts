import { BinaryReader, BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import type { CallOptions } from "@grpc/grpc-js";
import type { EtcdUnary } from "./log-append.js";

/**
 * KeepAlives sends the keep-alives of one lease (EtcdSession's): each
 * resolves with the lease's TTL in seconds as etcd's leader renewed it, 0
 * once etcd no longer has the lease, or fails by the options' deadline
 * with etcd3's error types.
 */
export interface KeepAlives {
  once(options: CallOptions): Promise<number>;
  /** close stops the keep-alives: one sent or answered after it fails. */
  close(): void;
}

/**
 * unaryKeepAlives sends each keep-alive as a LeaseKeepAlive stream of one
 * request, which etcd answers once and ends, on the lean client's
 * `keepAlive`. Each one goes to an endpoint of its own choosing, past any
 * that let a call run out (SilentEndpoints): a paused etcd leader holds
 * one attempt, not every attempt that a long-lived stream to it would.
 */
export function unaryKeepAlives(keepAlive: EtcdUnary, leaseId: string): KeepAlives {
  const request = encodeKeepAlive(leaseId);
  let closed = false;
  const stopped = () => new Error("the lease's keep-alives were stopped");
  return {
    once: async (options) => {
      if (closed) throw stopped();
      const ttl = decodeKeepAliveTtl(await keepAlive(request, options));
      if (closed) throw stopped();
      return ttl;
    },
    close: () => {
      closed = true;
    },
  };
}

/** encodeKeepAlive is a LeaseKeepAliveRequest: the lease's ID (1), an int64 in decimal as etcd3 gives it. */
export function encodeKeepAlive(leaseId: string): Uint8Array {
  return new BinaryWriter().tag(1, WireType.Varint).int64(leaseId).finish();
}

/** decodeKeepAliveTtl reads a LeaseKeepAliveResponse's TTL (3) in seconds, 0 when left out; its header (1) and ID (2) are skipped. */
export function decodeKeepAliveTtl(bytes: Uint8Array): number {
  const r = new BinaryReader(bytes);
  let ttl = 0;
  while (r.pos < r.len) {
    const [field, wire] = r.tag();
    if (field === 3 && wire === WireType.Varint) ttl = Number(r.int64());
    else r.skip(wire);
  }
  return ttl;
}
