import { truncateSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { AllocationStatus } from "../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { createMetadataClient } from "../../src/client/index.js";
import { runCli, startChildServer } from "../support/child-server.js";
import { tempDir } from "../support/temp-dir.js";

describe("hf3fs-metadata serve on a data dir", () => {
  it("keeps everything and its server id across SIGTERM and a restart; inspect shows it", async () => {
    const dir = tempDir();
    const first = await startChildServer(["--data-dir", dir]);
    const client = createMetadataClient({ baseUrl: first.url, retry: { deadlineMs: 0 } });
    const init = await client.initializeRank({ rank: 0, numPages: 64, worldSize: 1 });
    const { pages } = await client.batchAllocate({ rank: 0, keys: ["a", "b"] });
    await client.confirmWrite({ rank: 0, keys: ["a"], pages: [pages[0]!] });
    first.child.kill("SIGTERM");
    expect(await first.exited).toBe(0);

    const inspected = await runCli(["inspect", "--data-dir", dir]);
    expect(inspected.code).toBe(0);
    expect(inspected.stdout).toContain(init.serverId);
    expect(inspected.stdout).toMatch(/namespace kv .*keys 1\s+complete 1/);
    expect(inspected.stdout).toMatch(/\s0\s+64\s+62\s+1\s+1\s+\[/);

    const second = await startChildServer(["--data-dir", dir]);
    const again = createMetadataClient({ baseUrl: second.url, retry: { deadlineMs: 0 } });
    expect((await again.initializeRank({ rank: 0, numPages: 64, worldSize: 1 })).serverId).toBe(init.serverId);
    expect((await again.getLocations({ rank: 0, keys: ["a"] })).pages).toEqual([pages[0]]);
    expect(await again.batchAllocate({ rank: 0, keys: ["b"] })).toMatchObject({ pages: [pages[1]], statuses: [AllocationStatus.RESERVED] });
    second.child.kill("SIGTERM");
    expect(await second.exited).toBe(0);
  });

  it("inspect counts a shard's store among the pages its shard owns, and names the shard", async () => {
    const dir = tempDir();
    const server = await startChildServer(["--data-dir", dir, "--shards", "2", "--shard", "1"]);
    const client = createMetadataClient({ baseUrl: server.url, retry: { deadlineMs: 0 } });
    await client.initializeRank({ rank: 0, numPages: 64, worldSize: 1 });
    // Keys of any shard: a single node of shard 1 holds them all, on its own pages (the odd ones).
    const { pages } = await client.batchAllocate({ rank: 0, keys: ["a", "b", "c"] });
    expect(pages.every((page) => page % 2 === 1)).toBe(true);
    await client.confirmWrite({ rank: 0, keys: ["a", "b", "c"], pages });
    server.child.kill("SIGTERM");
    expect(await server.exited).toBe(0);
    const inspected = await runCli(["inspect", "--data-dir", dir]);
    expect(inspected.stdout).toMatch(/server id [0-9a-f-]{36} {2}shard 1 of 2\n/);
    // 64 pages declared, 32 of them the shard's: 29 free, 3 used, and the bar drawn over the 32.
    expect(inspected.stdout).toMatch(/\s0\s+64\s+29\s+0\s+3\s+\[###\.{27}\]/);
  });

  it("gives an in-memory server a new server id every start", async () => {
    const ids = [];
    for (let i = 0; i < 2; i++) {
      const server = await startChildServer(["--in-memory"]);
      ids.push((await createMetadataClient({ baseUrl: server.url }).initializeRank({ rank: 0, numPages: 1 })).serverId);
      server.child.kill("SIGTERM");
      await server.exited;
    }
    expect(ids[0]).not.toBe(ids[1]);
  });

  it("refuses to start over a corrupt store with a non-zero exit naming the path", async () => {
    const dir = tempDir();
    const first = await startChildServer(["--data-dir", dir]);
    await createMetadataClient({ baseUrl: first.url }).initializeRank({ rank: 0, numPages: 64 });
    first.child.kill("SIGTERM");
    await first.exited;
    truncateSync(join(dir, "data.mdb"), 4096);
    const { code, stderr } = await runCli(["serve", "--port", "0", "--data-dir", dir]);
    expect(code).toBe(1);
    expect(stderr).toContain(dir);
    expect(stderr).toMatch(/corrupt or truncated/);
  });

  it("refuses a second server on a data dir in use, after --lock-wait", async () => {
    const dir = tempDir();
    const first = await startChildServer(["--data-dir", dir]);
    const { code, stderr } = await runCli(["serve", "--port", "0", "--data-dir", dir, "--lock-wait", "300ms"]);
    expect(code).toBe(1);
    expect(stderr).toMatch(/is locked: another hf3fs-metadata server is using it \(waited 300 ms for it to stop\)/);
    first.child.kill("SIGTERM");
    expect(await first.exited).toBe(0);
  });

  it("starts a second server on a data dir in use once the first exits, holding the calls that came meanwhile", async () => {
    const dir = tempDir();
    const first = await startChildServer(["--data-dir", dir]);
    await createMetadataClient({ baseUrl: first.url }).initializeRank({ rank: 0, numPages: 64 });
    const second = await startChildServer(["--data-dir", dir]);
    await second.logged("the data dir is locked by another process; waiting for it to stop");
    const held = createMetadataClient({ baseUrl: second.url, retry: { deadlineMs: 0 } }).getStats({ namespace: "" });
    first.child.kill("SIGTERM");
    expect(await first.exited).toBe(0);
    const stats = await held;
    expect(stats.namespaces.map((ns) => ns.ranks.length)).toEqual([1]);
    second.child.kill("SIGTERM");
    expect(await second.exited).toBe(0);
  });
});
