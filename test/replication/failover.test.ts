import { ConnectError } from "@connectrpc/connect";
import { Etcd3 } from "etcd3";
import { afterEach, describe, expect, it } from "vitest";
import { AllocationStatus } from "../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { createMetadataClient, type MetadataClient } from "../../src/client/index.js";
import { ClusterKeys } from "../../src/replication/cluster-keys.js";
import { lacking } from "../support/debian-packages.js";
import { startEtcdCluster } from "../support/etcd-cluster.js";
import { kill9, restartServer, type Server, startServer, waitForLeader, waitForStandbys } from "../support/ha-cluster.js";

const missing = lacking("the HA failover tests", "etcd");

const NS = "ha";
const PAGES = 1 << 20;

/** Ledger is what the writers were told: every acknowledged reservation and confirmation, by key. */
interface Acked {
  reserved: Map<string, number>;
  confirmed: Map<string, number>;
  errors: string[];
}

/** writer loops BatchAllocate → ConfirmWrite of 4 new keys until stop, recording what was acknowledged. */
async function writer(client: MetadataClient, id: number, acked: Acked, stop: () => boolean): Promise<void> {
  for (let i = 0; !stop(); i++) {
    const keys = [0, 1, 2, 3].map((k) => `w${id}-${i}-${k}`);
    try {
      const res = await client.batchAllocate({ namespace: NS, rank: 0, keys });
      const mine = keys.flatMap((key, k) => (res.statuses[k] === AllocationStatus.NEW ? [[key, res.pages[k]!] as const] : []));
      for (const [key, page] of mine) acked.reserved.set(key, page);
      await client.confirmWrite({ namespace: NS, rank: 0, keys: mine.map(([key]) => key), pages: mine.map(([, page]) => page) });
      for (const [key, page] of mine) acked.confirmed.set(key, page);
    } catch (error) {
      acked.errors.push(`${keys[0]}: ${ConnectError.from(error).message}`);
    }
  }
}

describe.skipIf(missing !== "")("high availability on etcd: failover", () => {
  let servers: Server[] = [];
  afterEach(() => {
    servers = [];
  });

  it("kill -9 of the leader, five times, under 4 writers: a new leader serves, every acknowledged write is there, members converge", async () => {
    const etcd = await startEtcdCluster(3);
    servers = await Promise.all([0, 1, 2].map(() => startServer(etcd)));
    await waitForLeader(servers);
    const client = createMetadataClient({ baseUrl: servers.map((s) => s.url).join(","), retry: { deadlineMs: 30_000 } });
    await client.initializeRank({ namespace: NS, rank: 0, numPages: PAGES, worldSize: 1 });

    const acked: Acked = { reserved: new Map(), confirmed: new Map(), errors: [] };
    let stopping = false;
    const writers = [0, 1, 2, 3].map((id) => writer(client, id, acked, () => stopping));
    const confirmedAfter: number[] = [];
    for (let round = 0; round < 5; round++) {
      await new Promise((r) => setTimeout(r, 1_000));
      const leader = await waitForLeader(servers);
      await kill9(leader);
      const before = acked.confirmed.size;
      await waitForLeader(servers.filter((s) => s !== leader));
      await restartServer(leader);
      // The new leader acknowledges writes: the writers make progress past the failover.
      const deadline = Date.now() + 15_000;
      while (acked.confirmed.size <= before && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      confirmedAfter.push(acked.confirmed.size - before);
    }
    stopping = true;
    await Promise.all(writers);

    expect(acked.errors).toEqual([]);
    expect(confirmedAfter.every((n) => n > 0)).toBe(true);
    // Each new leader took over the state it kept as a hot standby; none had to load it from its store, and none failed to apply the log.
    const lines = servers.flatMap((s) => [...s.earlier, s.process].flatMap((p) => p.lines));
    const leading = lines.filter((l) => l.includes('"cluster: leading"')).map((l) => JSON.parse(l) as { hot: boolean });
    expect(leading.length).toBeGreaterThanOrEqual(6); // the first leader and the five after it (more if a lease lapsed under load)
    expect(leading.filter((l) => !l.hot)).toEqual([]);
    expect(lines.filter((l) => l.includes("could not apply the log"))).toEqual([]);
    // Every acknowledged reservation was confirmed (a lost one would have failed RESERVATION_NOT_FOUND), at the same page.
    expect(Object.fromEntries(acked.reserved)).toEqual(Object.fromEntries(acked.confirmed));
    const keys = [...acked.confirmed.keys()];
    const { pages } = await client.getLocations({ namespace: NS, rank: 0, keys });
    expect(pages).toEqual(keys.map((k) => acked.confirmed.get(k)));
    expect(new Set(pages).size).toBe(pages.length);

    // Every member's store restores to a state that keeps every invariant, and the standbys hold the same records, the log's to its end.
    const converged = await waitForStandbys(etcd, servers).catch((e) => {
      for (const s of servers)
        console.log(
          `DIAG ${s.url} exit=${s.process.child.exitCode} signal=${s.process.child.signalCode}\n${s.process.lines.slice(-8).join("\n")}\n${s.process.stderr.slice(-2000)}`,
        );
      throw e;
    });
    expect(converged.records.filter((r) => r.includes('"kind":"key"'))).toHaveLength(keys.length);
  }, 180_000);

  it("a leader killed -9 and restarted at once by its supervisor ends its own term: the others need not wait for its lease", async () => {
    const etcd = await startEtcdCluster(1);
    // A lease far longer than the test may wait: only the restarted member's own resignation can let another lead in time.
    servers = await Promise.all([0, 1].map(() => startServer(etcd, undefined, ["--leader-lease", "120s"])));
    const leader = await waitForLeader(servers);
    const client = new Etcd3({ hosts: etcd.endpoints.split(",") });
    try {
      const keys = new ClusterKeys("default");
      const before = (await client.kv.range({ key: keys.leader })).kvs[0]!;
      await kill9(leader);
      await restartServer(leader);
      await waitForLeader(servers, 60_000);
      const after = (await client.kv.range({ key: keys.leader })).kvs[0]!;
      expect(after.create_revision).not.toBe(before.create_revision);
      expect(after.lease).not.toBe(before.lease);
      // The killed process's lease is still alive in etcd: the new term did not come from its expiry.
      expect(Number((await client.leaseClient.leaseTimeToLive({ ID: before.lease })).TTL)).toBeGreaterThan(0);
    } finally {
      client.close();
    }
  }, 120_000);
});
