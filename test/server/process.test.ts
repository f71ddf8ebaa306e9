import { execFile } from "node:child_process";
import { once } from "node:events";
import { connect, createServer, type Socket } from "node:net";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { createMetadataClient } from "../../src/client/index.js";
import { runCli, startChildServer } from "../support/child-server.js";
import { tempDir } from "../support/temp-dir.js";

const exec = promisify(execFile);

/** bindable tells whether another process could listen on 127.0.0.1:port now. */
async function bindable(port: number): Promise<boolean> {
  const probe = createServer();
  const bound = await new Promise<boolean>((resolve) => probe.once("error", () => resolve(false)).listen(port, "127.0.0.1", () => resolve(true)));
  if (bound) await new Promise((resolve) => probe.close(resolve));
  return bound;
}
const BUF = new URL("../../node_modules/.bin/buf", import.meta.url).pathname;
const PROTO = new URL("../../proto", import.meta.url).pathname;

describe("hf3fs-metadata serve", () => {
  it("prints the address it listens on and exits 0 on SIGTERM despite an open HTTP/2 connection", async () => {
    const server = await startChildServer(["--in-memory"], { HF3FS_METADATA_RESERVATION_TTL: "5s" });
    expect(server.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(server.lines.filter((l) => l.includes('"listening"'))).toHaveLength(1);
    const listening = JSON.parse(server.lines.find((l) => l.includes('"listening"'))!) as { pid: number; time: string };
    expect(listening.pid).toBe(server.child.pid); // the server's own, for kill -HUP
    expect(listening.time).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/); // ISO 8601, UTC
    const client = createMetadataClient({ baseUrl: server.url, retry: { deadlineMs: 0 } });
    await client.initializeRank({ rank: 0, numPages: 4 });
    server.child.kill("SIGTERM");
    expect(await server.exited).toBe(0);
  });

  it("on SIGTERM, while a call is in flight, keeps its port and serves the calls that come, each connection closed after it; then frees the port and exits", async () => {
    const server = await startChildServer(["--in-memory"]);
    await server.logged("ready");
    const port = Number(new URL(server.url).port);
    const body = JSON.stringify({ keys: ["k"] });
    const request = (extra = "", sent = body) =>
      `POST /keys/batch_exists HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n${extra}content-length: ${body.length}\r\n\r\n${sent}`;
    /** ask sends a call on a connection and resolves with all it read once the server closed it. */
    const ask = async (socket: Socket) => {
      let read = "";
      socket.on("data", (d) => (read += d));
      const closed = once(socket, "close");
      socket.write(request());
      await closed;
      return read;
    };
    // A keep-alive connection that answered one call and now sits idle, as vLLM's scheduler's does while its workers write.
    const idle = connect(port, "127.0.0.1");
    let idleAnswer = "";
    const first = (d: Buffer) => (idleAnswer += d);
    idle.on("data", first);
    idle.write(request());
    while (!idleAnswer.includes('{"exists":[false]}')) await once(idle, "data");
    idle.off("data", first);
    // A vLLM call whose body is not all sent yet: in flight until the rest comes (as a call held upstream through a
    // failover is). Its "100 Continue" says the server took the call (Node answers it as it hands the request over), so
    // the SIGTERM comes after that, however busy the machine.
    const inFlight = connect(port, "127.0.0.1");
    await once(inFlight, "connect");
    let answer = "";
    inFlight.on("data", (d) => (answer += d));
    inFlight.write(request("expect: 100-continue\r\n", body.slice(0, 3)));
    while (!answer.includes("100 Continue")) await once(inFlight, "data");
    server.child.kill("SIGTERM");
    await server.logged("shutting down");

    // While the call is in flight, the idle client's next call and a new connection's are served, not refused nor
    // reset, and each connection is closed after its answer. The port is still the server's.
    for (const answered of [await ask(idle), await ask(connect(port, "127.0.0.1"))]) {
      expect(answered).toMatch(/^HTTP\/1\.1 200 /);
      expect(answered).toMatch(/\r\nconnection: close\r\n/i);
    }
    expect(await bindable(port)).toBe(false);
    expect(server.child.exitCode).toBeNull();

    // The call's answer, then the port is free and the process exits.
    inFlight.write(body.slice(3));
    expect(await server.exited).toBe(0);
    expect(answer).toMatch(/^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 200 /);
    expect(answer).toMatch(/\r\nconnection: close\r\n/i);
    expect(answer).toContain('{"exists":[false]}');
    expect(await bindable(port)).toBe(true);
  });

  it("on SIGTERM with no call in flight closes an idle keep-alive connection at once and exits", async () => {
    const server = await startChildServer(["--in-memory"]);
    await server.logged("ready");
    const idle = connect(Number(new URL(server.url).port), "127.0.0.1");
    let idleAnswer = "";
    idle.on("data", (d) => (idleAnswer += d));
    const body = JSON.stringify({ keys: ["k"] });
    idle.write(`POST /keys/batch_exists HTTP/1.1\r\nhost: x\r\ncontent-length: ${body.length}\r\n\r\n${body}`);
    while (!idleAnswer.includes('{"exists":[false]}')) await once(idle, "data");
    const idleClosed = once(idle, "close");
    server.child.kill("SIGTERM");
    await idleClosed; // at once, not when the idle client next speaks
    expect(await server.exited).toBe(0);
  });

  it("started while the previous process still drains a call, waits for the port, and serves once it is free", async () => {
    const dir = tempDir();
    const first = await startChildServer(["--data-dir", dir]);
    await first.logged("ready");
    const port = new URL(first.url).port;
    const client = createMetadataClient({ baseUrl: first.url, retry: { deadlineMs: 0 } });
    await client.initializeRank({ rank: 0, numPages: 4 });
    // A call in flight (its body not all sent), then SIGTERM, then the next process at once on the same port.
    const inFlight = connect(Number(port), "127.0.0.1");
    await once(inFlight, "connect");
    let answer = "";
    inFlight.on("data", (d) => (answer += d));
    const body = JSON.stringify({ keys: ["k"] });
    inFlight.write(`POST /keys/batch_exists HTTP/1.1\r\nhost: x\r\nexpect: 100-continue\r\ncontent-length: ${body.length}\r\n\r\n${body.slice(0, 3)}`);
    while (!answer.includes("100 Continue")) await once(inFlight, "data");
    first.child.kill("SIGTERM");
    const second = startChildServer(["--data-dir", dir, "--port", port]);
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(first.child.exitCode).toBeNull(); // still draining, its port held
    inFlight.write(body.slice(3));
    expect(await first.exited).toBe(0);
    const started = await second;
    expect(started.lines.some((l) => l.includes("the port is in use; waiting for it"))).toBe(true);
    const again = createMetadataClient({ baseUrl: started.url, retry: { deadlineMs: 0 } });
    expect((await again.getStats({})).namespaces[0]!.ranks[0]!.numPages).toBe(4);
  });

  it("on SIGTERM does not wait for a connection that has sent nothing (a port probe's)", async () => {
    const server = await startChildServer(["--in-memory", "--shutdown-timeout", "30s"]);
    await server.logged("ready");
    const silent = connect(Number(new URL(server.url).port), "127.0.0.1");
    await once(silent, "connect");
    const closed = once(silent, "close");
    server.child.kill("SIGTERM");
    await closed; // the server cut it, rather than wait --shutdown-timeout for its first byte
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

  it("exits 1 naming etcd when a cluster member cannot reach it", async () => {
    const { code, stderr } = await runCli(["serve", "--port", "0", "--data-dir", tempDir(), "--etcd-endpoints", "http://127.0.0.1:1"]);
    expect(code).toBe(1);
    expect(stderr).toMatch(/cannot reach etcd to join cluster "default": .*ECONNREFUSED/);
  });

  it("refuses a malformed option with exit code 2, in one line that points to --help", async () => {
    const { code, stderr } = await runCli(["serve", "--reservation-ttl", "soon"]);
    expect(code).toBe(2);
    expect(stderr.trim().split("\n")).toEqual([
      expect.stringMatching(/^hf3fs-metadata serve: --reservation-ttl: .*\(hf3fs-metadata serve --help lists the options\)$/),
    ]);
    const relay = await runCli(["relay"]);
    expect([relay.code, relay.stderr.trim()]).toEqual([2, expect.stringMatching(/^hf3fs-metadata relay: --upstream is required.*--help lists the options\)$/)]);
  });

  it("prints defaults in their own units in --help", async () => {
    const { stdout } = await runCli(["serve", "--help"]);
    expect(stdout).toContain("(default 1m; env HF3FS_METADATA_STARTUP_HOLD)");
    expect(stdout).toContain("(default 2s; env HF3FS_METADATA_LEADER_LEASE)");
    expect(stdout).toContain("(default none; env HF3FS_METADATA_TLS_CERT)");
    expect(stdout).not.toMatch(/\(default ;/);
  });
});

describe("hf3fs-metadata stats and health", () => {
  it("print a running server's usage per namespace and rank, and exit 0 when it serves", async () => {
    const server = await startChildServer();
    const client = createMetadataClient({ baseUrl: server.url, retry: { deadlineMs: 0 } });
    await client.initializeRank({ namespace: "ops", rank: 1, numPages: 10, worldSize: 2 });
    const { pages } = await client.batchAllocate({ namespace: "ops", rank: 1, keys: ["a", "b", "c"] });
    await client.confirmWrite({ namespace: "ops", rank: 1, keys: ["a", "b"], pages: pages.slice(0, 2) });

    const stats = await runCli(["stats", "--server", server.url]);
    expect(stats.code).toBe(0);
    expect(stats.stdout).toMatch(/namespace ops\s+world_size 2\s+keys 2\s+complete 0/);
    expect(stats.stdout).toMatch(/\s1\s+10\s+7\s+1\s+2\s+\[######\+{3}\.{21}\]/);
    const unknown = await runCli(["stats", "--server", server.url, "--namespace", "none"]);
    expect([unknown.code, unknown.stdout, unknown.stderr.trim()]).toEqual([1, "", `hf3fs-metadata stats: ${server.url} has no namespace "none"`]);

    const health = await runCli(["health", "--server", server.url]);
    expect(health).toMatchObject({ code: 0, stdout: "SERVING\n" });
  });

  it("health exits 1 for a server that is not there, naming it", async () => {
    const health = await runCli(["health", "--server", "http://127.0.0.1:9"]);
    expect(health.code).toBe(1);
    expect(health.stdout).toBe("UNREACHABLE\n");
    expect(health.stderr).toContain("http://127.0.0.1:9");
  });
});
