import { Etcd3 } from "etcd3";
import { afterEach, describe, expect, it } from "vitest";
import { ClusterKeys, type LeaderRecord, type MemberRecord } from "../../src/replication/cluster-keys.js";
import { ShardPeers, shardClusterName } from "../../src/server/shard-peers.js";
import { lacking } from "../support/debian-packages.js";
import { startEtcdCluster } from "../support/etcd-cluster.js";
import { stallableLeader } from "../support/stallable-leader.js";
import { until } from "../support/until.js";

const missing = lacking("the shard peers' test", "etcd");

const closing: (() => void)[] = [];
afterEach(() => {
  for (const close of closing.splice(0)) close();
});

describe.skipIf(missing !== "")("a member's calls to another shard (ShardPeers)", () => {
  it("go to the leader etcd names, and a call held on one that stalls goes again to the next, once its connection leaves a PING unanswered", async () => {
    const etcd = await startEtcdCluster(1);
    const client = new Etcd3({ hosts: etcd.endpoints.split(",") });
    closing.push(() => client.close());
    // Shard 1 of 2: a leads behind a proxy that can stall it, c is its standby; each refuses calls it does not lead for.
    const { leader: a, standby: c, proxy, heldThroughTakeOver } = await stallableLeader();
    const keys = new ClusterKeys(shardClusterName("peers", { count: 2, index: 1 }));
    const record = (memberId: string, url: string): MemberRecord => ({ memberId, url, role: "standby", appliedSeq: 0, atMs: Date.now() });
    const leader = (memberId: string, url: string) => client.put(keys.leader).value(JSON.stringify({ memberId, url } satisfies LeaderRecord));
    await client.put(keys.member("c")).value(JSON.stringify(record("c", c.url)));
    await client.put(keys.member("a")).value(JSON.stringify(record("a", proxy.url)));
    await leader("a", proxy.url);

    // The calls' connections are PINGed every 10 minutes: only the move to the next leader can free the held call.
    const peers = new ShardPeers(
      { of: () => client, close: () => undefined },
      { clusterName: "peers", part: { count: 2, index: 0 }, holdMs: 60_000, limits: { maxKeysPerCall: 1_000, maxBodyBytes: 1 << 20 }, pingMs: 600_000 },
    );
    closing.push(() => peers.close());
    await until(async () => (await peers.topology()).shards?.[1]?.members?.some((m) => m.leader) === true);
    const { serverId } = await peers.calls(1)("initializeRank", { namespace: "", rank: 0, numPages: 8 } as never);
    expect(serverId).toBe(a.store.serverId);

    // c leads (a's lease lapsed), and etcd names it; a still stalled.
    const { answer, ms } = await heldThroughTakeOver(() => peers.calls(1)("batchExists", { namespace: "", keys: ["k"] } as never), {
      told: () => leader("c", c.url),
    });
    console.log(`the held call was answered ${ms} ms after etcd named the next leader`);
    expect([answer.serverId, answer.response.exists]).toEqual([c.store.serverId, [false]]);
  }, 30_000);
});
