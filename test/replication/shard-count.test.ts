import { Etcd3 } from "etcd3";
import { afterEach, describe, expect, it } from "vitest";
import { ClusterKeys } from "../../src/replication/cluster-keys.js";
import { ensureClusterId } from "../../src/replication/election.js";
import { keepShardCount, shardCountKey } from "../../src/replication/shard-count.js";
import { lacking } from "../support/debian-packages.js";
import { startEtcdCluster } from "../support/etcd-cluster.js";

const missing = lacking("the shard count's tests", "etcd");

describe.skipIf(missing !== "")("a cluster's number of shards, kept in etcd", () => {
  const clients: Etcd3[] = [];
  afterEach(() => {
    for (const client of clients.splice(0)) client.close();
  });

  async function etcd(): Promise<Etcd3> {
    const cluster = await startEtcdCluster(1);
    const client = new Etcd3({ hosts: cluster.endpoints });
    clients.push(client);
    return client;
  }

  it("is recorded by the first member of a split cluster; members with the same count join, others are refused naming both", async () => {
    const client = await etcd();
    await keepShardCount(client, "split", 2);
    expect(await client.get(shardCountKey("split").toString())).toBe("2");
    await keepShardCount(client, "split", 2);
    await expect(keepShardCount(client, "split", 3)).rejects.toThrow(
      /--shards 3 does not match cluster "split" in etcd, split into 2 shards: start every member with --shards 2/,
    );
    await expect(keepShardCount(client, "split", 1)).rejects.toThrow(/--shards 1 does not match .* split into 2 shards/);
  });

  it("leaves a cluster of one shard as it is in etcd, and keeps a split count off it", async () => {
    const client = await etcd();
    const keys = new ClusterKeys("plain");
    // A cluster of one shard as today's members make it: its id, and no shard count.
    await keepShardCount(client, "plain", 1);
    await ensureClusterId(client, keys);
    await keepShardCount(client, "plain", 1);
    const all = await client.getAll().prefix(keys.prefix).keys();
    expect(all).toEqual([keys.id.toString()]);
    await expect(keepShardCount(client, "plain", 2)).rejects.toThrow(/--shards 2 does not match cluster "plain" in etcd, a cluster of 1 shard/);
    expect(await client.get(shardCountKey("plain").toString())).toBeNull();
  });
});
