import { describe, expect, it } from "vitest";
import { createMetadataClient } from "../../src/client/index.js";
import { lacking } from "../support/debian-packages.js";
import { startEtcdCluster } from "../support/etcd-cluster.js";
import { kill9, logEntry, readStored, restartServer, startServer, waitForLeader, waitForStandbys } from "../support/ha-cluster.js";

const missing = lacking("the HA leader's store tests", "etcd");

/** writer confirms new keys one call each (a log entry each) on a cluster's namespace, as a worker does, and keeps their names. */
function writer(client: ReturnType<typeof createMetadataClient>, namespace: string) {
  const written: string[] = [];
  const write = async (n: number) => {
    for (let i = 0; i < n; i++) {
      const key = `${namespace}${written.length}`;
      const { pages } = await client.batchAllocate({ namespace, rank: 0, keys: [key] });
      await client.confirmWrite({ namespace, rank: 0, keys: [key], pages });
      written.push(key);
    }
  };
  return { written, write };
}

describe.skipIf(missing !== "")("high availability on etcd: the leader's own store", () => {
  it("is not written while a standby keeps the state, is written whole once none does, and then restarts the cluster alone with every acknowledged key", async () => {
    const etcd = await startEtcdCluster(3);
    const servers = await Promise.all([0, 1, 2].map(() => startServer(etcd)));
    const leader = await waitForLeader(servers);
    const client = createMetadataClient({ baseUrl: servers.map((s) => s.url).join(",") });
    await client.initializeRank({ namespace: "l", rank: 0, numPages: 10_000, worldSize: 1 });
    const { written, write } = writer(client, "l");
    await write(20);
    await leader.process.logged("cluster: a standby keeps the state; the leader stops copying it to its store");

    // Past the 1,000 entries the log keeps beyond what the standbys applied: the entry after the leader's store is compacted away.
    await write(600);
    const standbys = await waitForStandbys(etcd, servers);
    expect(standbys.records.filter((r) => r.includes('"kind":"key"'))).toHaveLength(written.length);
    const own = await readStored(leader.dataDir);
    expect(own.records.filter((r) => r.includes('"kind":"key"')).length).toBeLessThanOrEqual(20);
    const deadline = Date.now() + 10_000;
    while ((await logEntry(etcd, "first")) <= own.appliedSeq + 1 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
    expect(await logEntry(etcd, "first")).toBeGreaterThan(own.appliedSeq + 1);

    // Both standbys die: the leader writes its state whole (no snapshot source is left), then copies again.
    await Promise.all(servers.filter((s) => s !== leader).map(kill9));
    await write(10);
    await leader.process.logged("cluster: the leader's store holds the state");
    await write(10);

    // Stopped as operators stop it, and started again alone, it serves every acknowledged key from its own store.
    leader.process.child.kill("SIGTERM");
    await leader.process.exited;
    await restartServer(leader);
    await waitForLeader([leader]);
    const alone = createMetadataClient({ baseUrl: leader.url });
    expect((await alone.batchExists({ namespace: "l", keys: written })).exists.every(Boolean)).toBe(true);
    expect(leader.process.lines.some((l) => l.includes("snapshot"))).toBe(false);
    expect((await readStored(leader.dataDir)).records.filter((r) => r.includes('"kind":"key"'))).toHaveLength(written.length);
  }, 120_000);

  it("a cluster stopped whole (SIGTERM, wait) and started again serves every acknowledged key; the last leader loads a snapshot", async () => {
    const etcd = await startEtcdCluster(1);
    const servers = await Promise.all([0, 1, 2].map(() => startServer(etcd)));
    const leader = await waitForLeader(servers);
    const client = createMetadataClient({ baseUrl: servers.map((s) => s.url).join(",") });
    await client.initializeRank({ namespace: "w", rank: 0, numPages: 10_000, worldSize: 1 });
    const { written, write } = writer(client, "w");
    await write(20);
    await leader.process.logged("cluster: a standby keeps the state; the leader stops copying it to its store");
    await write(540);
    await waitForStandbys(etcd, servers);
    const own = await readStored(leader.dataDir);
    const deadline = Date.now() + 10_000;
    while ((await logEntry(etcd, "first")) <= own.appliedSeq + 1 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));

    // Stopped as operators stop a cluster, the leader first, then started again together.
    for (const server of [leader, ...servers.filter((s) => s !== leader)]) {
      server.process.child.kill("SIGTERM");
      await server.process.exited;
    }
    await Promise.all(servers.map(restartServer));
    await waitForLeader(servers);
    expect((await client.batchExists({ namespace: "w", keys: written })).exists.every(Boolean)).toBe(true);
    const converged = await waitForStandbys(etcd, servers);
    expect(converged.records.filter((r) => r.includes('"kind":"key"'))).toHaveLength(written.length);
    // Its store stood before the log's start: it loaded a snapshot from a member whose store was current.
    expect(leader.process.lines.some((l) => l.includes('"cluster: snapshot loaded"'))).toBe(true);
  }, 120_000);
});
