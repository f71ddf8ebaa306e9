import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import { describe, expect, it } from "vitest";
import { ClusterService, KeyHash, PagePlacement } from "../../../gen/hf3fs/metadata/v1/cluster_pb.js";
import { callLimits } from "../../../src/client/topology-reading.js";
import { AccessPolicy } from "../../../src/service/access-policy.js";
import { tempDir } from "../../support/temp-dir.js";
import { startTestServer } from "../../support/test-server.js";

describe("ClusterService.GetTopology on a single node", () => {
  it("names the node as its shard's one member and leader, the other shards' members unknown, and the rules", async () => {
    const server = await startTestServer({}, undefined, 0, { shards: 3, shard: 1 });
    const topology = await createClient(ClusterService, createGrpcTransport({ baseUrl: server.url })).getTopology({});
    expect(topology.shardCount).toBe(3);
    expect(topology.shard).toBe(1);
    expect(topology.keyHash).toBe(KeyHash.MURMUR3_X86_32);
    expect(topology.pagePlacement).toBe(PagePlacement.MODULO);
    expect(topology.shards.map((s) => s.index)).toEqual([0, 1, 2]);
    expect(topology.shards.map((s) => s.members.map(({ id, url, leader }) => ({ id, url, leader })))).toEqual([
      [],
      [{ id: "", url: server.url, leader: true }],
      [],
    ]);
  });

  it("names the limits it holds a call to, which a router holds a whole call to before it splits it", async () => {
    const server = await startTestServer({ maxKeysPerCall: 300, maxKeyBytes: 200 }, undefined, 0, { shards: 2, shard: 0 });
    const topology = await createClient(ClusterService, createGrpcTransport({ baseUrl: server.url })).getTopology({});
    expect(callLimits(topology)).toEqual({ maxKeysPerCall: 300, maxKeyBytes: 200 });
    // A member older than the field names none: a router then leaves the limits to each shard's part.
    expect(callLimits({ ...topology, limits: undefined })).toBeUndefined();
  });

  it("answers a cluster of one shard over Connect's GET too (no side effects)", async () => {
    const server = await startTestServer();
    const transport = createConnectTransport({ baseUrl: server.url, httpVersion: "1.1", useHttpGet: true });
    const topology = await createClient(ClusterService, transport).getTopology({});
    expect(topology.shardCount).toBe(1);
    expect(topology.shards[0]?.members.map((m) => m.url)).toEqual([server.url]);
  });

  it("needs a known token when tokens are in force, as MetadataService calls do", async () => {
    const dir = tempDir();
    const workerTokenFile = join(dir, "workers");
    writeFileSync(workerTokenFile, "worker-token\n");
    const server = await startTestServer({}, undefined, 0, { access: new AccessPolicy({ workerTokenFile }) });
    const call = (token?: string) =>
      createClient(ClusterService, createGrpcTransport({ baseUrl: server.url }))
        .getTopology({}, { headers: token === undefined ? {} : { authorization: `Bearer ${token}` } })
        .then(
          (t) => `shards ${t.shardCount}`,
          (e: unknown) => Code[ConnectError.from(e).code],
        );
    expect(await call()).toBe("Unauthenticated");
    expect(await call("nope")).toBe("Unauthenticated");
    expect(await call("worker-token")).toBe("shards 1");
  });
});
