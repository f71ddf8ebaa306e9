import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { createMetadataClient } from "../../src/client/index.js";
import { runCli, startChildServer } from "../support/child-server.js";

const exec = promisify(execFile);
const BUF = new URL("../../node_modules/.bin/buf", import.meta.url).pathname;
const PROTO = new URL("../../proto", import.meta.url).pathname;

describe("hf3fs-metadata serve", () => {
  it("prints the address it listens on and exits 0 on SIGTERM despite an open HTTP/2 connection", async () => {
    const server = await startChildServer(["--in-memory"], { HF3FS_METADATA_RESERVATION_TTL: "5s" });
    expect(server.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(server.lines.filter((l) => l.includes('"listening"'))).toHaveLength(1);
    const client = createMetadataClient({ baseUrl: server.url, retry: { deadlineMs: 0 } });
    await client.initializeRank({ rank: 0, numPages: 4 });
    server.child.kill("SIGTERM");
    expect(await server.exited).toBe(0);
  });

  it("answers a buf curl call", async () => {
    const server = await startChildServer();
    const { stdout } = await exec(BUF, [
      "curl",
      "--schema",
      PROTO,
      "--protocol",
      "grpc",
      "--http2-prior-knowledge",
      "--data",
      '{"rank": 0, "num_pages": 1024, "world_size": 1}',
      `${server.url}/hf3fs.metadata.v1.MetadataService/InitializeRank`,
    ]);
    expect(JSON.parse(stdout)).toMatchObject({ created: true, numPages: 1024, freePages: 1024 });
  });

  it("refuses a malformed option with exit code 2 and the usage", async () => {
    const { code, stderr } = await runCli(["serve", "--reservation-ttl", "soon"]);
    expect(code).toBe(2);
    expect(stderr).toContain("--reservation-ttl");
    expect(stderr).toContain("usage: hf3fs-metadata serve");
  });
});
