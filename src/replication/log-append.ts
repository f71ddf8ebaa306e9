import type { CallOptions } from "@grpc/grpc-js";
import type { Etcd3, ICompare } from "etcd3";

/** Append is one log entry to put: at `key`, if the term's fence holds (ClusterKeys.heldBy: the leader key's create_revision) and `key` is new. */
export interface Append {
  readonly fence: ICompare & { key: Buffer; create_revision: string };
  readonly key: Buffer;
  readonly value: Buffer;
}

/** AppendAnswer is what the append's transaction answered: put, or not and then the fenced key's create_revision (whose term it is) and whether the entry exists. */
export interface AppendAnswer {
  readonly succeeded: boolean;
  readonly leaderRevision: string | undefined;
  readonly entryExists: boolean;
}

/**
 * LogAppend sends an Append as one etcd transaction, within the options'
 * deadline: compare the fence and the entry's version (0: absent), put
 * the entry if both hold, else read the fenced key and the entry. It
 * fails with etcd3's error types, so that attempts() sends again what may
 * be the endpoint's fault.
 */
export type LogAppend = (append: Append, options: CallOptions) => Promise<AppendAnswer>;

/** etcd3Append is LogAppend through the etcd3 client's KV.txn. */
export function etcd3Append(client: Etcd3): LogAppend {
  return async ({ fence, key, value }, options) => {
    const res = await client.kv.txn(
      {
        compare: [fence, { key, target: "Version", result: "Equal", version: 0 }],
        success: [{ request_put: { key, value } }],
        failure: [{ request_range: { key: fence.key } }, { request_range: { key } }],
      },
      options,
    );
    if (res.succeeded) return { succeeded: true, leaderRevision: undefined, entryExists: false };
    const [held, entry] = res.responses.map((r) => r.response_range?.kvs[0]);
    return { succeeded: false, leaderRevision: held?.create_revision, entryExists: entry !== undefined };
  };
}

/** EtcdUnary sends etcd one request of a method (KV.Txn, one LeaseKeepAlive), as its protobuf bytes, within the options' deadline and resolves with the answer's bytes, failing with etcd3's error types. */
export type EtcdUnary = (request: Uint8Array, options: CallOptions) => Promise<Uint8Array>;
