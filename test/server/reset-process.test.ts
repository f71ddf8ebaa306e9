import { once } from "node:events";
import { writeFileSync } from "node:fs";
import * as http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { createMetadataClient } from "../../src/client/index.js";
import { runCli, startChildServer } from "../support/child-server.js";
import { lacking } from "../support/debian-packages.js";
import { startEtcdCluster } from "../support/etcd-cluster.js";
import { kill9, startServer, waitForLeader } from "../support/ha-cluster.js";
import { tempDir } from "../support/temp-dir.js";

const missing = lacking("the reset test on a cluster", "etcd");

/** vllmInit is vLLM's worker init of rank 0 with numPages: its status. */
const vllmInit = async (url: string, numPages: number) =>
  (await fetch(`${url}/rank/0/initialize`, { method: "POST", body: JSON.stringify({ num_pages: numPages }) })).status;

describe("hf3fs-metadata reset", () => {
  it("keeps a grown rank across a restart, and forgets a namespace through the CLI, with an admin token, for good", async () => {
    const dir = tempDir();
    const admin = join(dir, "admin");
    writeFileSync(admin, "admin-secret\n");
    const worker = join(dir, "worker");
    writeFileSync(worker, "worker-secret\n");
    const args = ["--data-dir", join(dir, "data"), "--auth-token-file", worker, "--admin-token-file", admin];
    let server = await startChildServer(args);
    await server.logged("ready");
    const client = createMetadataClient({ baseUrl: server.url, token: "worker-secret" });
    await client.initializeRank({ rank: 0, numPages: 8, worldSize: 1 });
    expect(await client.initializeRank({ rank: 0, numPages: 16, worldSize: 1 })).toMatchObject({ created: false, numPages: 16 }); // its file grew
    server.child.kill("SIGTERM");
    expect(await server.exited).toBe(0);
    server = await startChildServer(args);
    await server.logged("ready");
    const resized = createMetadataClient({ baseUrl: server.url, token: "worker-secret" });
    expect((await resized.getStats({ namespace: "kv" })).namespaces[0]!.ranks[0]).toMatchObject({ numPages: 16, freePages: 16 });
    expect((await runCli(["reset"])).code).toBe(2); // neither --namespace nor --all
    const denied = await runCli(["reset", "--server", server.url, "--namespace", "kv"], { HF3FS_METADATA_TOKEN: "worker-secret" });
    expect([denied.code, denied.stderr]).toEqual([1, expect.stringMatching(/admin/)]);
    const done = await runCli(["reset", "--server", server.url, "--namespace", "kv"], { HF3FS_METADATA_TOKEN: "admin-secret" });
    expect([done.code, done.stdout.trim()]).toEqual([0, 'reset namespace "kv": 1 namespace(s), 1 rank(s) and 0 key(s) forgotten']);
    server.child.kill("SIGTERM");
    expect(await server.exited).toBe(0);
    server = await startChildServer(args);
    await server.logged("ready");
    const again = createMetadataClient({ baseUrl: server.url, token: "worker-secret" });
    expect((await again.getStats({ allNamespaces: true })).namespaces).toEqual([]);
    await again.initializeRank({ rank: 0, numPages: 1024 }); // defined anew: world_size 0, another page count
  }, 30_000);
});

describe.skipIf(missing !== "")("hf3fs-metadata reset on a cluster", () => {
  it("is replicated, as a resize is: after a failover the new leader has the rank grown, after another the namespace forgotten", async () => {
    const etcd = await startEtcdCluster(1);
    const servers = await Promise.all([0, 1, 2].map(() => startServer(etcd)));
    const first = await waitForLeader(servers);
    const client = createMetadataClient({ baseUrl: servers.map((s) => s.url).join(",") });
    await client.initializeRank({ rank: 0, numPages: 8, worldSize: 1 });
    await client.initializeRank({ rank: 0, numPages: 12, worldSize: 1 });
    await kill9(first);
    const second = await waitForLeader(servers);
    const stats = createMetadataClient({ baseUrl: second.url });
    expect((await stats.getStats({ namespace: "kv" })).namespaces[0]!.ranks[0]!.numPages).toBe(12);
    expect(await vllmInit(second.url, 64)).toBe(409);
    expect((await runCli(["reset", "--server", second.url, "--all"])).code).toBe(0);
    await kill9(second);
    const third = await waitForLeader(servers);
    expect([third === first, third === second]).toEqual([false, false]);
    expect(await vllmInit(third.url, 64)).toBe(200);
    // inspect names a member's data dir by the cluster's id, which clients see, and by its own member id.
    const inspected = await runCli(["inspect", "--data-dir", first.dataDir]);
    expect(inspected.stdout).toMatch(/ cluster id [0-9a-f-]{36} {2}member id [0-9a-f-]{36}\n/);
  }, 60_000);
});

describe("hf3fs-metadata reset and clear with vLLM running", () => {
  it("reset refuses and offers clear; clear lets the engine go on; a forced reset leaves it at 404 until it initializes again", async () => {
    const server = await startChildServer(["--in-memory"]);
    await server.logged("ready");
    const vllm = async (path: string, body: unknown) => {
      const res = await fetch(`${server.url}${path}`, { method: "POST", body: JSON.stringify(body) });
      return { status: res.status, body: res.status === 204 ? undefined : ((await res.json()) as Record<string, unknown>) };
    };
    const write = async (key: string) => {
      const allocated = await vllm("/keys/batch_allocate", { rank: 0, keys: [[key, null]] });
      if (allocated.status !== 200) return allocated.status;
      return (await vllm("/keys/confirm_write", { rank: 0, confirmations: (allocated.body as { results: unknown }).results })).status;
    };
    expect((await vllm("/rank/0/initialize", { num_pages: 8 })).status).toBe(200);
    expect(await write("a")).toBe(204);
    const refused = await runCli(["reset", "--server", server.url, "--namespace", "kv"]);
    expect([refused.code, refused.stderr]).toEqual([1, expect.stringContaining("its engines are running")]);
    expect(refused.stderr).toContain('clear it: hf3fs-metadata clear --namespace "kv"');
    const cleared = await runCli(["clear", "--server", server.url, "--namespace", "kv"]);
    expect([cleared.code, cleared.stdout.trim()]).toEqual([0, 'clear namespace "kv": every key and reservation dropped, the ranks kept']);
    expect((await vllm("/keys/batch_exists", { keys: ["a"] })).body).toEqual({ exists: [false] }); // a miss: vLLM computes it again
    expect(await write("b")).toBe(204);
    const forced = await runCli(["reset", "--server", server.url, "--namespace", "kv", "--force"]);
    expect(forced.code).toBe(0);
    expect(await write("c")).toBe(404); // vLLM's client never initializes again: the runbook says to restart the engines
    expect((await vllm("/rank/0/initialize", { num_pages: 8 })).status).toBe(200);
    expect(await write("c")).toBe(204);
  }, 30_000);
});

describe("hf3fs-metadata reset that gets no answer", () => {
  it("says the reset may have taken effect, how to check, and that a repeat is safe; a refusal says nothing of the kind", async () => {
    // A server that takes each call and breaks the connection under it: the call may have been applied, its answer is lost.
    const breaking = http2.createServer();
    breaking.on("stream", (stream) => stream.session?.destroy());
    breaking.listen(0, "127.0.0.1");
    await once(breaking, "listening");
    const url = `http://127.0.0.1:${(breaking.address() as AddressInfo).port}`;
    const lost = await runCli(["reset", "--server", url, "--namespace", "kv", "--retry-for", "300ms"]);
    expect(lost.code).toBe(1);
    expect(lost.stderr).toContain(
      'the reset of namespace "kv" may have taken effect nonetheless; `hf3fs-metadata stats --namespace "kv"` shows what is there, and running reset again is safe',
    );
    breaking.close();
    const server = await startChildServer(["--in-memory"]);
    await createMetadataClient({ baseUrl: server.url }).initializeRank({ rank: 0, numPages: 8, worldSize: 1 });
    await createMetadataClient({ baseUrl: server.url }).batchAllocate({ rank: 0, keys: ["k"] }); // a write in flight
    const refused = await runCli(["reset", "--server", server.url, "--namespace", "kv"]);
    expect([refused.code, refused.stderr]).toEqual([1, expect.stringContaining("its engines are running")]);
    expect(refused.stderr).not.toContain("may have taken effect");
    expect((await runCli(["reset", "--server", server.url, "--all", "--retry-for", "soon"])).code).toBe(2);
  });
});
