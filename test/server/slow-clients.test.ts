import * as http from "node:http";
import * as http2 from "node:http2";
import * as net from "node:net";
import { describe, expect, it } from "vitest";
import { createMetadataClient } from "../../src/client/index.js";
import { startTestServer } from "../support/test-server.js";

const LIMITS = { requestTimeoutMs: 300, idleTimeoutMs: 400 };

/** closedByServer resolves when the server closes a socket that never sent anything. */
function silentConnection(port: number): { socket: net.Socket; closed: Promise<void> } {
  const socket = net.connect(port, "127.0.0.1");
  socket.on("error", () => undefined);
  return { socket, closed: new Promise((resolve) => socket.once("close", () => resolve())) };
}

describe("slow and idle clients", () => {
  it("hundreds of silent connections do not stop a normal client, and are cut after the request timeout", async () => {
    const server = await startTestServer({}, undefined, 0, LIMITS);
    server.state.initializeRank("", 0, 4, 1);
    const port = Number(new URL(server.url).port);
    const silent = Array.from({ length: 300 }, () => silentConnection(port));
    const client = createMetadataClient({ baseUrl: server.url, retry: { deadlineMs: 0 } });
    expect((await client.batchExists({ keys: ["k"] })).exists).toEqual([false]);
    await Promise.all(silent.map((c) => c.closed));
  });

  it("a body trickled byte by byte is cut with DEADLINE_EXCEEDED after the request timeout, while others are served", async () => {
    const server = await startTestServer({}, undefined, 0, LIMITS);
    server.state.initializeRank("", 0, 4, 1);
    const session = http2.connect(server.url);
    try {
      const stream = session.request({ ":method": "POST", ":path": "/hf3fs.metadata.v1.MetadataService/BatchExists", "content-type": "application/grpc" });
      stream.on("error", () => undefined);
      stream.resume();
      const trickle = setInterval(() => stream.write(Buffer.from([0])), 20);
      const status = new Promise<string>((resolve) =>
        stream.once("trailers", (t) => resolve(`${t["grpc-status"]} ${decodeURIComponent(String(t["grpc-message"]))}`)),
      );
      const client = createMetadataClient({ baseUrl: server.url, retry: { deadlineMs: 0 } });
      expect((await client.batchExists({ keys: ["k"] })).exists).toEqual([false]);
      expect(await status).toMatch(/^4 the request body did not arrive whole within 300 ms/);
      clearInterval(trickle);
    } finally {
      session.destroy();
    }
  });

  it("an HTTP/1.1 JSON body trickled byte by byte is answered 408", async () => {
    const server = await startTestServer({}, undefined, 0, LIMITS);
    const req = http.request(`${server.url}/keys/batch_exists`, { method: "POST", headers: { "content-type": "application/json" } });
    req.on("error", () => undefined);
    const trickle = setInterval(() => req.write(" "), 20);
    const res = await new Promise<http.IncomingMessage>((resolve) => req.once("response", resolve));
    clearInterval(trickle);
    expect(res.statusCode).toBe(408);
    req.destroy();
  });

  it("an HTTP/2 connection without a call for the idle timeout gets GOAWAY", async () => {
    const server = await startTestServer({}, undefined, 0, LIMITS);
    const session = http2.connect(server.url);
    session.on("error", () => undefined);
    const client = createMetadataClient({ baseUrl: server.url, retry: { deadlineMs: 0 } });
    await client.batchExists({ keys: ["k"] });
    await new Promise<void>((resolve) => session.once("goaway", () => resolve()));
    session.destroy();
  });

  it("connections past --max-connections are closed as they come", async () => {
    const server = await startTestServer({}, undefined, 0, { maxConnections: 3 });
    const port = Number(new URL(server.url).port);
    const held = Array.from({ length: 3 }, () => silentConnection(port));
    await Promise.all(held.map((c) => new Promise((resolve) => c.socket.once("connect", resolve))));
    await new Promise((resolve) => setImmediate(resolve));
    const extra = silentConnection(port);
    await extra.closed;
    for (const c of held) c.socket.destroy();
    await Promise.all(held.map((c) => c.closed));
    const client = createMetadataClient({ baseUrl: server.url, retry: { deadlineMs: 0 } });
    expect((await client.batchExists({ keys: ["k"] })).exists).toEqual([false]);
  });
});
