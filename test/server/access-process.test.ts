import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { createMetadataClient } from "../../src/client/index.js";
import { runCli, startChildServer } from "../support/child-server.js";
import { tempDir } from "../support/temp-dir.js";

const WORKER = "w0rker-s3cret-token";
const ADMIN = "adm1n-s3cret-token";
const ADDED = "added-by-sighup-token";

describe("serve with token files", () => {
  it("keeps health open, guards /metrics, reloads on SIGHUP, lets the CLI in with --token-file, and never logs a token", async () => {
    const dir = tempDir();
    const workers = join(dir, "workers");
    const admins = join(dir, "admins");
    writeFileSync(workers, `${WORKER}\n`);
    writeFileSync(admins, `${ADMIN}\n`);
    const server = await startChildServer([
      "--in-memory",
      "--auth-token-file",
      workers,
      "--admin-token-file",
      admins,
      "--metrics-auth",
      "--log-level",
      "trace",
    ]);
    const client = (token?: string) => createMetadataClient({ baseUrl: server.url, token, retry: { deadlineMs: 0 } });

    await expect(client().initializeRank({ rank: 0, numPages: 4 })).rejects.toThrow(/needs a token/);
    await client(WORKER).initializeRank({ rank: 0, numPages: 4 });
    expect((await runCli(["health", "--server", server.url])).stdout.trim()).toBe("SERVING");
    expect((await fetch(`${server.url}/metrics`)).status).toBe(401);
    expect((await fetch(`${server.url}/metrics`, { headers: { authorization: `Bearer ${WORKER}` } })).status).toBe(200);
    expect((await runCli(["stats", "--server", server.url])).code).toBe(1);
    const stats = await runCli(["stats", "--server", server.url, "--token-file", workers]);
    expect([stats.code, stats.stdout]).toEqual([0, expect.stringContaining("namespace kv")]);
    expect((await runCli(["stats", "--server", server.url], { HF3FS_METADATA_TOKEN: ADMIN })).code).toBe(0);

    writeFileSync(workers, `${ADDED}\n`);
    server.child.kill("SIGHUP");
    const reloaded = () => server.lines.some((line) => line.includes("token files reloaded"));
    for (let i = 0; i < 100 && !reloaded(); i++) await new Promise((resolve) => setTimeout(resolve, 20));
    expect(reloaded()).toBe(true);
    await client(ADDED).batchExists({ keys: ["k"] });
    await expect(client(WORKER).batchExists({ keys: ["k"] })).rejects.toThrow(/not known/);

    server.child.kill("SIGTERM");
    expect(await server.exited).toBe(0);
    const output = server.lines.join("\n") + server.stderr;
    for (const token of [WORKER, ADMIN, ADDED]) expect(output).not.toContain(token);
  });

  it("warns when it listens beyond loopback without tokens and TLS", async () => {
    const server = await startChildServer(["--in-memory", "--host", "0.0.0.0"]);
    expect(server.lines.join("\n")).toMatch(/listening beyond loopback without --auth-token-file .* and without TLS/);
  });

  it("refuses to start on a token file it cannot read", async () => {
    const run = await runCli(["serve", "--in-memory", "--auth-token-file", "/nonexistent/tokens"]);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain("cannot read the token file /nonexistent/tokens");
    // Before it binds the port: a restart with a bad file never takes the port over from the process it replaces.
    expect(run.stdout).not.toContain('"listening"');
  });
});
