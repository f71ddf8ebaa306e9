import { execFile } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { createMetadataClient } from "../../src/client/index.js";
import { SWEEP_CHUNK } from "../../src/store/rank-sweep.js";
import { makeCertificates } from "../support/certificates.js";
import { lacking } from "../support/debian-packages.js";
import { startEtcdCluster } from "../support/etcd-cluster.js";
import { kill9, restartServer, startServer, waitForConvergence, waitForLeader, waitForStandbys } from "../support/ha-cluster.js";
import { tempDir } from "../support/temp-dir.js";

const missing = lacking("the HA catch-up tests", "etcd");
const missingTls = lacking("the HA snapshot over mTLS test", "etcd", "openssl");

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

/** firstLogEntry waits up to 10 s for the leader to compact the log's first entry away, and gives the key of the first one kept. */
async function firstLogEntry(endpoints: string): Promise<string | undefined> {
  const first = async () => {
    const { stdout } = await exec("/usr/bin/etcdctl", [
      "--endpoints",
      endpoints,
      "get",
      "--prefix",
      "--keys-only",
      "--limit",
      "1",
      "/hf3fs-metadata/default/log/",
    ]);
    return stdout.split("\n").find((l) => l !== "");
  };
  const deadline = Date.now() + 10_000;
  let key = await first();
  while (key?.endsWith("0000000000000001") && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 500));
    key = await first();
  }
  return key;
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
    await waitForStandbys(etcd, [a!, b!]);
    expect(standby.process.lines.some((l) => l.includes("snapshot"))).toBe(false);

    // Past the 1,000 entries the log keeps beyond what every member applied, its start is compacted away.
    for (let i = 0; i < 1_100; i++) await write(`many-${i}`);
    expect(await firstLogEntry(etcd.endpoints)).not.toMatch(/0000000000000001$/);

    // The snapshot comes from the caught-up standby, not from the leader, whose one event loop every write needs.
    const fresh = await startServer(etcd, undefined, LONG_LEASE);
    const converged = await waitForStandbys(etcd, [a!, b!, fresh]);
    expect(await loadedFrom(fresh)).toBe(standby.url);
    expect(converged.records.filter((r) => r.includes('"kind":"key"'))).toHaveLength(1 + 20 + 1_100);

    // With every standby gone (their records kept by their leases), a member asks each in turn, then the leader.
    await kill9(standby);
    await kill9(fresh);
    const last = await startServer(etcd);
    await waitForConvergence([leader.dataDir, last.dataDir]);
    expect(await loadedFrom(last)).toBe(leader.url);
    // (Each may be asked more than once: the leader refuses while it writes its state to its own store, which it kept no copy of while the standbys lived.)
    const passed = last.process.lines.filter((l) => l.includes("no snapshot from this member")).map((l) => (JSON.parse(l) as { from: string }).from);
    expect([...new Set(passed)].sort()).toEqual([standby.url, fresh.url].sort());
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
    const converged = await waitForStandbys(etcd, [a!, b!]);
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

describe.skipIf(missingTls !== "")("high availability on etcd: a snapshot between members with tokens and mTLS", () => {
  it("a member started after compaction loads it from the standby over mTLS, presenting its admin token", async () => {
    const dir = tempDir();
    const certs = makeCertificates(dir);
    writeFileSync(join(dir, "tokens"), "worker-secret\n");
    writeFileSync(join(dir, "admin-tokens"), "admin-secret\n");
    const secure = [
      ...["--auth-token-file", join(dir, "tokens"), "--admin-token-file", join(dir, "admin-tokens")],
      ...["--tls-cert", certs.serverCert, "--tls-key", certs.serverKey, "--tls-client-ca", certs.ca],
    ];
    const etcd = await startEtcdCluster(1);
    const members = await Promise.all([startServer(etcd, undefined, secure), startServer(etcd, undefined, secure)]);
    const tls = { ca: readFileSync(certs.ca), cert: readFileSync(certs.clientCert), key: readFileSync(certs.clientKey) };
    const client = createMetadataClient({ baseUrl: members.map((m) => m.url).join(","), token: "worker-secret", tls });
    await client.initializeRank({ namespace: "t", rank: 0, numPages: 10_000, worldSize: 1 });
    for (let i = 0; i < 1_100; i++) {
      const { pages } = await client.batchAllocate({ namespace: "t", rank: 0, keys: [`k${i}`] });
      await client.confirmWrite({ namespace: "t", rank: 0, keys: [`k${i}`], pages });
    }
    expect(await firstLogEntry(etcd.endpoints)).not.toMatch(/0000000000000001$/);
    const standby = members.find((m) => !m.process.lines.some((l) => l.includes('"cluster: leading"')))!;
    const leader = members.find((m) => m !== standby)!;

    const fresh = await startServer(etcd, undefined, secure);
    const converged = await waitForStandbys(etcd, [...members, fresh], { leader });
    expect(await loadedFrom(fresh)).toBe(standby.url);
    expect(converged.records.filter((r) => r.includes('"kind":"key"'))).toHaveLength(1_100);
  }, 120_000);
});
