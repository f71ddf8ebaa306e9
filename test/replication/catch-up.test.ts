import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { createMetadataClient } from "../../src/client/index.js";
import { SWEEP_CHUNK } from "../../src/store/rank-sweep.js";
import { lacking } from "../support/debian-packages.js";
import { startEtcdCluster } from "../support/etcd-cluster.js";
import { kill9, restartServer, startServer, waitForConvergence, waitForLeader } from "../support/ha-cluster.js";

const missing = lacking("the HA catch-up tests", "etcd");

const exec = promisify(execFile);

/** LONG_LEASE keeps a killed member's record in etcd for the rest of the test, as a member that just died has. */
const LONG_LEASE = ["--leader-lease", "60s"];

/** loadedFrom waits up to 5 s for a member's "snapshot loaded" line and gives the member it loaded from. */
async function loadedFrom(server: { process: { lines: string[] } }): Promise<string | undefined> {
  const find = () => server.process.lines.find((l) => l.includes("snapshot loaded"));
  const deadline = Date.now() + 5_000;
  while (find() === undefined && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  const line = find();
  return line === undefined ? undefined : (JSON.parse(line) as { from: string }).from;
}

describe.skipIf(missing !== "")("high availability on etcd: catching up", () => {
  it("a standby restarted on its data dir catches up from the log; one started empty after compaction loads a snapshot", async () => {
    const etcd = await startEtcdCluster(3);
    const [a, b] = await Promise.all([startServer(etcd, undefined, LONG_LEASE), startServer(etcd, undefined, LONG_LEASE)]);
    await waitForLeader([a!, b!]);
    const client = createMetadataClient({ baseUrl: `${a!.url},${b!.url}` });
    await client.initializeRank({ namespace: "c", rank: 0, numPages: 100_000, worldSize: 1 });
    const write = async (key: string) => {
      const { pages } = await client.batchAllocate({ namespace: "c", rank: 0, keys: [key] });
      await client.confirmWrite({ namespace: "c", rank: 0, keys: [key], pages });
    };
    const leader = await waitForLeader([a!, b!]);
    const standby = leader === a ? b! : a!;
    await write("before");
    await kill9(standby);
    for (let i = 0; i < 20; i++) await write(`while-down-${i}`);
    await restartServer(standby);
    await waitForConvergence([a!.dataDir, b!.dataDir]);
    expect(standby.process.lines.some((l) => l.includes("snapshot"))).toBe(false);

    // Past the 1,000 entries the log keeps beyond what every member applied, its start is compacted away.
    for (let i = 0; i < 1_100; i++) await write(`many-${i}`);
    const { stdout } = await exec("/usr/bin/etcdctl", ["--endpoints", etcd.endpoints, "get", "--prefix", "--keys-only", "/hf3fs-metadata/default/log/"], {
      maxBuffer: 1 << 24,
    });
    const deadline = Date.now() + 10_000;
    let first = stdout.split("\n").find((l) => l !== "");
    while (first?.endsWith("0000000000000001") && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 500));
      const res = await exec("/usr/bin/etcdctl", [
        "--endpoints",
        etcd.endpoints,
        "get",
        "--prefix",
        "--keys-only",
        "--limit",
        "1",
        "/hf3fs-metadata/default/log/",
      ]);
      first = res.stdout.split("\n").find((l) => l !== "");
    }
    expect(first).not.toMatch(/0000000000000001$/);

    // The snapshot comes from the caught-up standby, not from the leader, whose one event loop every write needs.
    const fresh = await startServer(etcd, undefined, LONG_LEASE);
    const converged = await waitForConvergence([a!.dataDir, b!.dataDir, fresh.dataDir]);
    expect(await loadedFrom(fresh)).toBe(standby.url);
    expect(converged.records.filter((r) => r.includes('"kind":"key"'))).toHaveLength(1 + 20 + 1_100);

    // With every standby gone (their records kept by their leases), a member asks each in turn, then the leader.
    await kill9(standby);
    await kill9(fresh);
    const last = await startServer(etcd);
    await waitForConvergence([leader.dataDir, last.dataDir]);
    expect(await loadedFrom(last)).toBe(leader.url);
    const passed = last.process.lines.filter((l) => l.includes("no snapshot from this member")).map((l) => (JSON.parse(l) as { from: string }).from);
    expect(passed.sort()).toEqual([standby.url, fresh.url].sort());
  }, 120_000);

  it("a DropRank of one rank of several is one log record: a standby that was down applies it from the log, and takes over with it", async () => {
    const etcd = await startEtcdCluster(3);
    const [a, b] = await Promise.all([startServer(etcd), startServer(etcd)]);
    await waitForLeader([a!, b!]);
    const client = createMetadataClient({ baseUrl: `${a!.url},${b!.url}` });
    const keys = Array.from({ length: 2 * SWEEP_CHUNK + 50 }, (_, i) => `k${i}`);
    for (const rank of [0, 1, 2]) await client.initializeRank({ namespace: "d", rank, numPages: 2 * keys.length, worldSize: 0 }); // never full: no eviction
    const confirm = async (rank: number, names: string[]) => {
      const { pages } = await client.batchAllocate({ namespace: "d", rank, keys: names });
      await client.confirmWrite({ namespace: "d", rank, keys: names, pages });
    };
    for (let at = 0; at < keys.length; at += 1_000) for (const rank of [0, 1]) await confirm(rank, keys.slice(at, at + 1_000));
    await confirm(2, ["only-on-2"]);
    expect((await client.batchExists({ namespace: "d", keys: ["k0"] })).exists).toEqual([false]); // rank 2 counts: incomplete
    const leader = await waitForLeader([a!, b!]);
    const standby = leader === a ? b! : a!;
    await kill9(standby);
    const before = (await client.getStats({ namespace: "d" })).namespaces[0]!;
    expect((await client.dropRank({ namespace: "d", rank: 2 })).forgottenKeys).toBe(1);
    await confirm(0, ["after"]);
    await restartServer(standby);
    const converged = await waitForConvergence([a!.dataDir, b!.dataDir]);
    const records = converged.records.map((r) => JSON.parse(r) as { kind: string; rank?: number; pages?: number[] });
    expect(records.filter((r) => r.kind === "rank").map((r) => r.rank)).toEqual([0, 1]);
    expect(records.filter((r) => r.kind === "key")).toHaveLength(keys.length + 1);
    expect(records.every((r) => r.kind !== "key" || r.pages!.filter((_, i) => i % 2 === 0).every((rank) => rank !== 2))).toBe(true);
    expect(before.keys).toBe(BigInt(keys.length + 1));
    // The standby that applied the drop from the log leads with it: every key on ranks 0 and 1 is complete.
    await kill9(leader);
    await waitForLeader([standby]);
    const single = createMetadataClient({ baseUrl: standby.url });
    expect((await single.batchExists({ namespace: "d", keys: ["k0", keys.at(-1)!, "only-on-2", "after"] })).exists).toEqual([true, true, false, false]);
  }, 120_000);
});
