import { execFileSync } from "node:child_process";
import { symlinkSync } from "node:fs";
import { join } from "node:path";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { Etcd3 } from "etcd3";
import { describe, expect, it } from "vitest";
import { ClusterService } from "../../gen/hf3fs/metadata/v1/cluster_pb.js";
import { createMetadataClient } from "../../src/client/index.js";
import { type ChildServer, startInstalledCommand } from "../support/child-server.js";
import { lacking } from "../support/debian-packages.js";
import { freePort, startEtcdCluster } from "../support/etcd-cluster.js";
import { tempDir } from "../support/temp-dir.js";

const missing = lacking("the upgrade test", "etcd");

/** BEFORE_SHARDS is the last commit before shards: a cluster of one shard as it made them. */
const BEFORE_SHARDS = "7548cdd";
const ROOT = new URL("../..", import.meta.url).pathname;

/** checkout writes the tree of a commit of this repository into a new directory, with this checkout's node_modules (its package.json is the same). */
function checkout(commit: string): string {
  const dir = tempDir();
  execFileSync("sh", ["-c", `git -C "${ROOT}" archive "${commit}" | tar -x -C "${dir}"`]);
  symlinkSync(join(ROOT, "node_modules"), join(dir, "node_modules"));
  return dir;
}

/** member runs `serve` of a checkout's CLI as a cluster member on its data dir and port, once it joined. */
async function member(root: string, dataDir: string, port: number, endpoints: string): Promise<ChildServer> {
  const child = await startInstalledCommand(join(root, "src/cli/bin.mjs"), "serve", [
    "--data-dir",
    dataDir,
    "--etcd-endpoints",
    endpoints,
    "--port",
    String(port),
  ]);
  await child.logged("cluster: joined");
  return child;
}

/** stop ends a member as operators do: SIGTERM, then wait for the exit. */
async function stop(child: ChildServer): Promise<void> {
  child.child.kill("SIGTERM");
  await child.exited;
}

describe.skipIf(missing !== "")("an upgrade", () => {
  it("starts a cluster of one shard made by the code before shards on its data dirs and etcd, and serves what it held", async () => {
    const old = checkout(BEFORE_SHARDS);
    const etcd = await startEtcdCluster(1);
    const dirs = [tempDir(), tempDir()];
    const ports = await Promise.all(dirs.map(() => freePort()));
    const urls = ports.map((port) => `http://127.0.0.1:${port}`);
    let members = await Promise.all(dirs.map((dir, i) => member(old, dir, ports[i]!, etcd.endpoints)));
    const client = createMetadataClient({ baseUrl: urls.join(",") });
    await client.initializeRank({ namespace: "kv", rank: 0, numPages: 1_000, worldSize: 1 });
    const keys = Array.from({ length: 100 }, (_, i) => `before-${i}`);
    const { pages } = await client.batchAllocate({ namespace: "kv", rank: 0, keys });
    await client.confirmWrite({ namespace: "kv", rank: 0, keys, pages });
    // The code before shards it is: it knows no topology.
    await expect(createClient(ClusterService, createGrpcTransport({ baseUrl: urls[0]! })).getTopology({})).rejects.toThrow(/unimplemented/i);
    await Promise.all(members.map(stop));

    members = await Promise.all(dirs.map((dir, i) => member(ROOT, dir, ports[i]!, etcd.endpoints)));
    try {
      expect((await client.getLocations({ namespace: "kv", rank: 0, keys })).pages).toEqual(pages);
      const more = await client.batchAllocate({ namespace: "kv", rank: 0, keys: ["after"] });
      await client.confirmWrite({ namespace: "kv", rank: 0, keys: ["after"], pages: more.pages });
      expect(more.pages.some((page) => pages.includes(page))).toBe(false);
      expect((await client.batchExists({ namespace: "kv", keys: [...keys, "after"] })).exists.every(Boolean)).toBe(true);
      // Still one shard, as it was: nothing written in etcd to say so.
      const topology = await createClient(ClusterService, createGrpcTransport({ baseUrl: urls[0]! })).getTopology({});
      expect(topology.shards).toHaveLength(1);
      const kv = new Etcd3({ hosts: etcd.endpoints });
      try {
        expect(Object.keys(await kv.getAll().prefix("/hf3fs-metadata/").strings()).filter((key) => key.includes("shards"))).toEqual([]);
      } finally {
        kv.close();
      }
    } finally {
      await Promise.all(members.map(stop));
    }
  }, 120_000);
});
