import { once } from "node:events";
import { readdirSync } from "node:fs";
import * as http2 from "node:http2";
import * as net from "node:net";
import { describe, expect, it } from "vitest";
import { createMetadataClient } from "../../src/client/index.js";
import { type ChildServer, startChildServer } from "../support/child-server.js";

const PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
const EMPTY_SETTINGS = Buffer.from([0, 0, 0, 0x4, 0, 0, 0, 0, 0]);
/** A PING must carry 8 bytes; 3 is a FRAME_SIZE_ERROR, which the server answers with GOAWAY. */
const SHORT_PING = Buffer.from([0, 0, 3, 0x6, 0, 0, 0, 0, 0, 1, 2, 3]);

const openFds = (server: ChildServer) => readdirSync(`/proc/${server.child.pid}/fd`).length;

/** malformedConnection sends the preface and a malformed frame, waits for the server's answer (GOAWAY) or close, then ends its side. */
function malformedConnection(port: number): Promise<void> {
  return new Promise((resolve) => {
    const socket = net.connect(port, "127.0.0.1", () => socket.write(Buffer.concat([PREFACE, EMPTY_SETTINGS, SHORT_PING])));
    socket.on("error", () => undefined);
    socket.once("data", () => socket.end());
    socket.once("close", () => resolve());
  });
}

/** rapidReset opens and cancels streams until the server ends the session (Node answers a flood of resets with GOAWAY). */
async function rapidReset(url: string): Promise<void> {
  const session = http2.connect(url);
  session.on("error", () => undefined);
  const ended = new Promise<void>((resolve) => session.once("close", () => resolve()));
  session.once("goaway", () => session.close());
  await new Promise((resolve) => session.once("connect", resolve));
  for (let i = 0; i < 5_000 && !session.closed && !session.destroyed; i++) {
    const stream = session.request({ ":method": "POST", ":path": "/hf3fs.metadata.v1.MetadataService/BatchExists", "content-type": "application/grpc" });
    stream.on("error", () => undefined);
    stream.close(http2.constants.NGHTTP2_CANCEL);
    if (i % 100 === 99) await new Promise((resolve) => setImmediate(resolve));
  }
  session.close();
  await ended;
}

/** fdsSettle waits (polling, up to 10 s) until the server holds at most `count` descriptors, and returns what it holds. */
async function fdsSettle(server: ChildServer, count: number): Promise<number> {
  const deadline = Date.now() + 10_000;
  let fds = openFds(server);
  while (fds > count && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    fds = openFds(server);
  }
  return fds;
}

describe("HTTP/2 sessions ended by the server", () => {
  it("release their sockets: malformed frames and rapid resets leave no descriptor behind", async () => {
    const server = await startChildServer(["--in-memory", "--http2-keepalive", "200ms"]);
    const client = createMetadataClient({ baseUrl: server.url, retry: { deadlineMs: 0 } });
    await client.initializeRank({ rank: 0, numPages: 4, worldSize: 1 });
    const baseline = openFds(server);
    const port = Number(new URL(server.url).port);
    for (let round = 0; round < 3; round++) await Promise.all(Array.from({ length: 100 }, () => malformedConnection(port)));
    await Promise.all(Array.from({ length: 4 }, () => rapidReset(server.url)));
    expect(await fdsSettle(server, baseline)).toBeLessThanOrEqual(baseline);
    expect((await client.batchExists({ keys: ["k"] })).exists).toEqual([false]);
  });
});

/** callWithoutReading posts vLLM's batch_exists on a session that opens no flow-control window, so no answer can be sent; it resolves with the code the stream was reset with. */
function callWithoutReading(session: http2.ClientHttp2Session): Promise<number> {
  return unreadCall(session, ["a", "b"]).closed;
}

/** unreadCall posts batch_exists of `keys` on a session; `answered` resolves once its headers came, `closed` with the code the stream was reset with (-1: none). */
function unreadCall(
  session: http2.ClientHttp2Session,
  keys: string[],
): { stream: http2.ClientHttp2Stream; answered: Promise<unknown>; closed: Promise<number> } {
  const stream = session.request({ ":method": "POST", ":path": "/keys/batch_exists", "content-type": "application/json" });
  stream.on("error", () => undefined);
  stream.end(JSON.stringify({ keys }));
  return {
    stream,
    answered: once(stream, "response"),
    closed: new Promise((resolve) => stream.once("close", () => resolve(stream.rstCode ?? -1))),
  };
}

describe("an answer its caller does not read", () => {
  // A client that stopped reading held its answers, and its connection, for as long as it answered PINGs.
  it("is cancelled once it waited unsent for the request timeout; one read late, within it, arrives whole", async () => {
    const server = await startChildServer(["--in-memory", "--request-timeout", "2s", "--http2-keepalive", "1s"]);
    const stuck = http2.connect(server.url, { settings: { initialWindowSize: 0 } });
    stuck.on("error", () => undefined);
    const cancelled = Promise.all(Array.from({ length: 5 }, () => callWithoutReading(stuck)));

    // Another caller, as slow, opens its window after 1.5 s: within the timeout, its answer is not cancelled.
    const late = http2.connect(server.url, { settings: { initialWindowSize: 0 } });
    late.on("error", () => undefined);
    const stream = late.request({ ":method": "POST", ":path": "/keys/batch_exists", "content-type": "application/json" });
    stream.on("error", () => undefined);
    stream.end(JSON.stringify({ keys: ["a"] }));
    const chunks: Buffer[] = [];
    stream.on("data", (chunk: Buffer) => chunks.push(chunk));
    const lateAnswer = new Promise((resolve) => stream.once("end", () => resolve(JSON.parse(Buffer.concat(chunks).toString()))));
    setTimeout(() => late.settings({ initialWindowSize: 65_535 }), 1_500);

    expect(await lateAnswer).toEqual({ exists: [false] });
    expect(await cancelled).toEqual(Array(5).fill(http2.constants.NGHTTP2_CANCEL));
    expect(await (await fetch(`${server.url}/metrics`)).text()).toMatch(/^hf3fs_metadata_unread_answers_reset_total\{limit="time"\} 5$/m);
    // The connection stays usable: a call on it whose answer it reads is answered.
    stuck.settings({ initialWindowSize: 65_535 });
    const again = stuck.request({ ":method": "POST", ":path": "/keys/batch_exists", "content-type": "application/json" });
    again.on("error", () => undefined);
    again.end(JSON.stringify({ keys: ["a"] }));
    const [headers] = (await once(again, "response")) as [http2.IncomingHttpHeaders];
    expect(headers[":status"]).toBe(200);
    stuck.close();
    late.close();
  });

  it("is cancelled as well when its caller PINGs on its own, so that its connection is never silent", async () => {
    // A minute before a silence is probed: within the test, only the caller's PINGs bring the look.
    const server = await startChildServer(["--in-memory", "--request-timeout", "1s", "--http2-keepalive", "60s"]);
    const stuck = http2.connect(server.url, { settings: { initialWindowSize: 0 } });
    stuck.on("error", () => undefined);
    const pings = setInterval(() => stuck.ping(() => undefined), 200);
    try {
      expect(await Promise.all(Array.from({ length: 3 }, () => callWithoutReading(stuck)))).toEqual(Array(3).fill(http2.constants.NGHTTP2_CANCEL));
    } finally {
      clearInterval(pings);
      stuck.close();
    }
  }, 20_000);

  it("is cancelled while such answers hold more than --max-unsent-bytes, the largest holder's first; the others arrive whole", async () => {
    // 10,000 keys a call: an answer of about 60 KB. The time limit is far off: only the byte limit cancels here.
    const server = await startChildServer(["--in-memory", "--request-timeout", "60s", "--max-unsent-bytes", "2000000"]);
    const keys = Array.from({ length: 10_000 }, (_, i) => `key-${i}`);
    const hog = http2.connect(server.url, { settings: { initialWindowSize: 0 } });
    const slow = http2.connect(server.url, { settings: { initialWindowSize: 0 } });
    for (const session of [hog, slow]) session.on("error", () => undefined);
    try {
      const hogs = Array.from({ length: 50 }, () => unreadCall(hog, keys)); // about 3 MB unsent
      await Promise.all(hogs.map((call) => call.answered));
      expect(await Promise.all(hogs.map((call) => call.closed))).toEqual(Array(50).fill(http2.constants.NGHTTP2_CANCEL));

      const slows = Array.from({ length: 20 }, () => unreadCall(slow, keys)); // about 1.2 MB unsent: within the limit
      await Promise.all(slows.map((call) => call.answered));
      await new Promise((resolve) => setTimeout(resolve, 2_500)); // two sweeps at least
      expect(slows.filter((call) => call.stream.closed)).toEqual([]);
      const bodies = slows.map(({ stream }) => {
        const chunks: Buffer[] = [];
        stream.on("data", (chunk: Buffer) => chunks.push(chunk));
        return new Promise((resolve) => stream.once("end", () => resolve(JSON.parse(Buffer.concat(chunks).toString()).exists.length)));
      });
      slow.settings({ initialWindowSize: 1 << 20 });
      expect(await Promise.all(bodies)).toEqual(Array(20).fill(10_000));
      const metrics = await (await fetch(`${server.url}/metrics`)).text();
      expect(metrics).toMatch(/^hf3fs_metadata_unread_answers_reset_total\{limit="bytes"\} 50$/m);
      expect(metrics).toMatch(/^hf3fs_metadata_unread_answers_reset_total\{limit="time"\} 0$/m);
    } finally {
      hog.close();
      slow.close();
    }
  }, 30_000);
});
