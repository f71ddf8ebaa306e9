import type { Etcd3 } from "etcd3";
import { ClusterKeys } from "./cluster-keys.js";
import { attempts } from "./within.js";

/**
 * shardCountKey is where a cluster split into shards keeps S:
 * `/hf3fs-metadata/<cluster name>/shards`, beside the keys of a cluster of
 * one shard (which never writes it, so that today's clusters stay as they
 * are in etcd).
 */
export function shardCountKey(clusterName: string): Buffer {
  return Buffer.from(`${new ClusterKeys(clusterName).prefix}shards`);
}

/**
 * keepShardCount holds a member to the cluster's shard count: the first
 * member of a cluster split into S > 1 shards records S (unless a cluster
 * of one shard by that name exists already), and a member whose --shards
 * differs from what is recorded is refused, naming both. A member of a
 * cluster of one shard writes nothing.
 */
export async function keepShardCount(client: Etcd3, clusterName: string, count: number): Promise<void> {
  const key = shardCountKey(clusterName);
  const keys = new ClusterKeys(clusterName);
  // A repeat of a put that landed fails its compare and reads the count it put.
  const res = await attempts(10_000, (options) =>
    client.kv.txn(
      {
        compare: count > 1 ? [keys.absent(key), keys.absent(keys.id)] : [keys.absent(key)],
        success: count > 1 ? [{ request_put: { key, value: Buffer.from(String(count)) } }] : [],
        failure: [{ request_range: { key } }, { request_range: { key: keys.id } }],
      },
      options,
    ),
  ).catch((error: Error) => {
    throw new Error(`cannot reach etcd to join cluster "${clusterName}": ${error.message}`);
  });
  if (res.succeeded) return;
  const [recorded, unsplit] = res.responses.map((r) => r.response_range?.kvs[0]);
  const kept = recorded === undefined ? 1 : Number(recorded.value.toString());
  if (kept === count) return;
  const was = recorded === undefined && unsplit !== undefined ? "a cluster of 1 shard" : `split into ${kept} shards`;
  throw new Error(
    `--shards ${count} does not match cluster "${clusterName}" in etcd, ${was}: start every member with --shards ${kept}, or make a new cluster (--cluster-name) to change the number of shards (docs/sizing.md)`,
  );
}
