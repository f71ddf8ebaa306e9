import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { createMetadataClient } from "../../src/client/index.js";
import { lacking } from "../support/debian-packages.js";
import { startEtcdCluster } from "../support/etcd-cluster.js";
import { kill9, restartServer, startServer, waitForConvergence, waitForLeader } from "../support/ha-cluster.js";

const missing = lacking("the HA catch-up tests", "etcd");

const exec = promisify(execFile);

describe.skipIf(missing !== "")("high availability on etcd: catching up", () => {
  it("a standby restarted on its data dir catches up from the log; one started empty after compaction loads a snapshot", async () => {
    const etcd = await startEtcdCluster(3);
    const [a, b] = await Promise.all([startServer(etcd), startServer(etcd)]);
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

    const fresh = await startServer(etcd);
    const converged = await waitForConvergence([a!.dataDir, b!.dataDir, fresh.dataDir]);
    const logged = Date.now() + 5_000;
    while (!fresh.process.lines.some((l) => l.includes("snapshot loaded")) && Date.now() < logged) await new Promise((r) => setTimeout(r, 50));
    expect(fresh.process.lines.some((l) => l.includes("snapshot loaded"))).toBe(true);
    expect(converged.records.filter((r) => r.includes('"kind":"key"'))).toHaveLength(1 + 20 + 1_100);
  }, 120_000);
});
