import { spawn } from "node:child_process";
import { once } from "node:events";
import * as net from "node:net";
import { describe, expect, it } from "vitest";
import { type ChildServer, startChildRelay, startChildServer } from "../support/child-server.js";
import { type ActivationSocket, activationSocket } from "../support/socket-activation.js";
import { tempDir } from "../support/temp-dir.js";

const BIN = new URL("../../src/cli/bin.mjs", import.meta.url).pathname;

/** post sends a vLLM JSON call and resolves with its status and body. */
async function post(url: string, path: string, body: unknown): Promise<{ status: number; body: string }> {
  const res = await fetch(`${url}${path}`, { method: "POST", body: JSON.stringify(body), headers: { "content-type": "application/json" } });
  return { status: res.status, body: await res.text() };
}

/**
 * connectedCall connects to `port` (resolving once the connection is made)
 * and sends a vLLM JSON call on it; `answer` is the whole HTTP/1.1 answer,
 * read until the server closes the connection.
 */
async function connectedCall(port: number, path: string, body: unknown): Promise<{ answer: Promise<string> }> {
  const socket = net.connect(port, "127.0.0.1");
  await once(socket, "connect");
  const json = JSON.stringify(body);
  socket.write(
    `POST ${path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: ${json.length}\r\nconnection: close\r\n\r\n${json}`,
  );
  let answer = "";
  socket.on("data", (d) => (answer += d));
  return { answer: once(socket, "close").then(() => answer) };
}

/** starter is how `verb` is started on `socket` as its socket-activated service: serve on a data dir, or relay in front of a server. */
async function starter(verb: "serve" | "relay", socket: ActivationSocket): Promise<() => Promise<ChildServer>> {
  if (verb === "serve") {
    const args = ["--data-dir", tempDir(), "--port", String(socket.port)];
    return () => startChildServer(args, {}, socket.wrapper);
  }
  const upstream = await startChildServer(["--data-dir", tempDir()]);
  const args = ["--upstream", upstream.url, "--port", String(socket.port)];
  return () => startChildRelay(args, {}, socket.wrapper);
}

describe("socket activation (a socket systemd keeps across a service's restarts)", () => {
  for (const verb of ["serve", "relay"] as const) {
    it(`${verb} listens on the socket it is passed, and a call made while no process runs waits there for the next one`, async () => {
      const socket = await activationSocket();
      const start = await starter(verb, socket);
      const first = await start();
      expect(first.url).toBe(`http://127.0.0.1:${socket.port}`);
      expect(first.lines.some((line) => (JSON.parse(line) as { socket?: string }).socket === "systemd")).toBe(true);
      expect((await post(first.url, "/rank/0/initialize", { num_pages: 64 })).status).toBe(200);

      first.child.kill("SIGTERM");
      expect(await first.exited).toBe(0);
      // No process listens now; the socket's keeper accepts nothing, and the connection, made, waits in its backlog.
      const call = await connectedCall(socket.port, "/keys/batch_allocate", { rank: 0, keys: [["k", null]] });
      const second = await start();
      const answer = await call.answer;
      expect(answer).toMatch(/^HTTP\/1\.1 200 /);
      // The rank initialized before the restart is known to the next process (its store, or the relay's upstream).
      expect(JSON.parse(answer.slice(answer.indexOf("\r\n\r\n") + 4))).toEqual({ rank: 0, results: [["k", expect.any(Number)]] });
      second.child.kill("SIGTERM");
      expect(await second.exited).toBe(0);
    }, 60_000);
  }

  it("a --port other than the socket's is refused at start, naming both", async () => {
    const socket = await activationSocket();
    const child = spawn(socket.wrapper[0]!, [...socket.wrapper.slice(1), process.execPath, BIN, "serve", "--in-memory", "--port", String(socket.port + 1)], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stderr = "";
    child.stderr.on("data", (d) => (stderr += d));
    const code = await new Promise((resolve) => child.on("close", resolve));
    expect(code).toBe(1);
    expect(stderr).toContain(`the socket systemd passed listens on port ${socket.port}, and --port is ${socket.port + 1}`);
  }, 30_000);

  it("warns of listening beyond loopback by the socket's address, whatever --host says", async () => {
    // The unit's ListenStream= is every address; --host (127.0.0.1 here, as the test's servers run) is not where it listens.
    const socket = await activationSocket("0.0.0.0");
    const server = await startChildServer(["--in-memory", "--port", String(socket.port)], {}, socket.wrapper);
    expect(server.url).toBe(`http://0.0.0.0:${socket.port}`);
    const warning = server.lines
      .map((line) => JSON.parse(line) as { msg?: string; host?: string })
      .find((event) => event.msg?.startsWith("listening beyond loopback"));
    expect(warning?.host).toBe("0.0.0.0");
    server.child.kill("SIGTERM");
    expect(await server.exited).toBe(0);
  }, 30_000);
});
