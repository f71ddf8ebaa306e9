import { writeFileSync } from "node:fs";
import * as http2 from "node:http2";
import { join } from "node:path";
import { brotliCompressSync, gzipSync } from "node:zlib";
import { create, toBinary } from "@bufbuild/protobuf";
import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import { describe, expect, it } from "vitest";
import { HealthCheckRequestSchema } from "../../../gen/grpc/health/v1/health_pb.js";
import { BatchExistsRequestSchema } from "../../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { envelope } from "../../../src/protocol/envelope.js";
import { AccessPolicy } from "../../../src/service/access-policy.js";
import { tempDir } from "../../support/temp-dir.js";
import { startTestServer } from "../../support/test-server.js";

const EXISTS = "/hf3fs.metadata.v1.MetadataService/BatchExists";
const HEALTH = "/grpc.health.v1.Health/Check";

/** unknownFields is a message of n unknown varint fields (field 15): nothing a server keeps, but entries to count. */
function unknownFields(n: number): Uint8Array {
  const writer = new BinaryWriter();
  for (let i = 0; i < n; i++) writer.tag(15, WireType.Varint).uint32(0);
  return writer.finish();
}

/** framed is a message in its gRPC envelope, with the envelope's flags (1: compressed). */
const framed = (flags: number, message: Uint8Array) => envelope(message, flags);

/** grpc sends one gRPC call over HTTP/2 and answers "<grpc-status> <message>". */
async function grpc(url: string, path: string, headers: http2.OutgoingHttpHeaders, body: Buffer): Promise<string> {
  const session = http2.connect(url);
  try {
    const stream = session.request({ ":method": "POST", ":path": path, "content-type": "application/grpc", te: "trailers", ...headers });
    stream.end(body);
    stream.resume();
    const trailers = await new Promise<http2.IncomingHttpHeaders>((resolve, reject) => {
      stream.once("trailers", resolve);
      stream.once("response", (h) => h["grpc-status"] !== undefined && resolve(h));
      stream.once("error", reject);
    });
    return `${trailers["grpc-status"]} ${decodeURIComponent(String(trailers["grpc-message"] ?? ""))}`;
  } finally {
    session.close();
  }
}

/** connectGet sends a Connect GET of BatchExists with `message` (base64) in the query. */
async function connectGet(url: string, message: Uint8Array, compression?: string, authorization?: string): Promise<{ status: number; body: string }> {
  const query = new URLSearchParams({ connect: "v1", encoding: "proto", base64: "1", message: Buffer.from(message).toString("base64url") });
  if (compression !== undefined) query.set("compression", compression);
  const headers: Record<string, string> = authorization === undefined ? {} : { authorization };
  const res = await fetch(`${url}${EXISTS}?${query}`, { headers });
  return { status: res.status, body: Buffer.from(await res.arrayBuffer()).toString("latin1") };
}

function tokenFiles(): { workerTokenFile: string; adminTokenFile: string } {
  const dir = tempDir();
  writeFileSync(join(dir, "worker"), "worker-token\n");
  writeFileSync(join(dir, "admin"), "admin-token\n");
  return { workerTokenFile: join(dir, "worker"), adminTokenFile: join(dir, "admin") };
}

describe("compressed and GET requests are bounded like every other", () => {
  it("a tokenless Connect GET is refused before its message is decompressed, on a server that needs tokens", async () => {
    const server = await startTestServer({}, undefined, 0, { access: new AccessPolicy(tokenFiles()) });
    // Not brotli at all: decompressing it would fail with INVALID_ARGUMENT; the token check comes first.
    const answer = await connectGet(server.url, Buffer.from("not brotli"), "br");
    expect(answer.status).toBe(401);
    expect(answer.body).toContain("needs a token");
  });

  it("a compressed message of too many entries is refused before it is decoded, in every compressed framing", async () => {
    const server = await startTestServer({ maxKeysPerCall: 4 }, undefined, 0, { access: new AccessPolicy(tokenFiles()) });
    const auth = "Bearer worker-token";
    const junk = unknownFields(200); // more than 4 × 4 + 64 = 80 entries
    expect(await grpc(server.url, EXISTS, { "grpc-encoding": "br", authorization: auth }, framed(1, brotliCompressSync(junk)))).toMatch(
      /^3 .*more than 80 entries/,
    );
    expect(await grpc(server.url, EXISTS, { "grpc-encoding": "gzip", authorization: auth }, framed(1, gzipSync(junk)))).toMatch(/^3 .*more than 80 entries/);
    const post = await fetch(server.url + EXISTS, {
      method: "POST",
      headers: { "content-type": "application/proto", "content-encoding": "gzip", authorization: auth },
      body: gzipSync(junk),
    });
    expect([post.status, await post.text()]).toEqual([400, expect.stringMatching(/more than 80 entries/)]);
    const get = await connectGet(server.url, brotliCompressSync(junk), "br", auth);
    expect([get.status, get.body]).toEqual([400, expect.stringMatching(/more than 80 entries/)]);
  });

  it("a compressed message that inflates past the body limit is refused, and the server goes on serving", async () => {
    const server = await startTestServer({}, undefined, 0, { maxBodyBytes: 1 << 20 });
    const bomb = brotliCompressSync(Buffer.alloc(16 << 20, 0x78)); // 16 MiB of one byte, in a few hundred bytes
    expect(bomb.length).toBeLessThan(10_000);
    expect(await grpc(server.url, EXISTS, { "grpc-encoding": "br" }, framed(1, bomb))).toMatch(/^8 .*larger than/);
    expect((await connectGet(server.url, bomb, "br")).status).toBe(429);
    const exists = toBinary(BatchExistsRequestSchema, create(BatchExistsRequestSchema, { keys: ["a"] }));
    expect(await grpc(server.url, EXISTS, {}, framed(0, exists))).toBe("0 ");
  });

  it("a compressed Connect GET of a valid message is answered as the POST of it is", async () => {
    const server = await startTestServer();
    server.state.initializeRank("kv", 0, 4, 1);
    const [page] = server.state.batchAllocate("kv", 0, ["a"]).pages;
    server.state.confirmWrite("kv", 0, ["a"], [page!]);
    const message = toBinary(BatchExistsRequestSchema, create(BatchExistsRequestSchema, { keys: ["a", "b"] }));
    const answer = await connectGet(server.url, gzipSync(message), "gzip");
    expect(answer.status).toBe(200);
    expect([...Buffer.from(answer.body, "latin1")]).toEqual([0x0a, 0x02, 0x01, 0x00]); // exists: [true, false], packed
  });

  it("health and reflection take small bodies only, however compressed", async () => {
    const server = await startTestServer();
    const big = toBinary(HealthCheckRequestSchema, create(HealthCheckRequestSchema, { service: "x".repeat(100_000) }));
    expect(await grpc(server.url, HEALTH, { "grpc-encoding": "br" }, framed(1, brotliCompressSync(big)))).toMatch(/^8 .*larger than/);
    expect(await grpc(server.url, HEALTH, {}, framed(0, big))).toMatch(/^8 .*larger than 65536/);
    const small = toBinary(HealthCheckRequestSchema, create(HealthCheckRequestSchema, {}));
    expect(await grpc(server.url, HEALTH, { "grpc-encoding": "gzip" }, framed(1, gzipSync(small)))).toBe("0 ");
  });

  it("a Connect GET waits while the state loads, like a POST", async () => {
    const server = await startTestServer({}, undefined, 0, { starting: true });
    server.state.initializeRank("kv", 0, 4, 1);
    const message = toBinary(BatchExistsRequestSchema, create(BatchExistsRequestSchema, { keys: ["a"] }));
    const session = http2.connect(server.url);
    try {
      const query = new URLSearchParams({ connect: "v1", encoding: "proto", base64: "1", message: Buffer.from(message).toString("base64url") });
      const get = session.request({ ":method": "GET", ":path": `${EXISTS}?${query}` });
      const chunks: Buffer[] = [];
      get.on("data", (chunk: Buffer) => chunks.push(chunk));
      let answered = false;
      const status = new Promise<number>((resolve) => get.once("response", (h) => resolve(Number(h[":status"]))));
      const ended = new Promise((resolve) => get.once("end", resolve)).then(() => (answered = true));
      // On the same connection, after the GET: the health check is answered while the GET still waits.
      const health = session.request({ ":method": "POST", ":path": HEALTH, "content-type": "application/grpc", te: "trailers" });
      health.end(framed(0, new Uint8Array()));
      health.resume();
      await new Promise((resolve) => health.once("trailers", resolve));
      expect(answered).toBe(false);
      const [page] = server.state.batchAllocate("kv", 0, ["a"]).pages;
      server.state.confirmWrite("kv", 0, ["a"], [page!]);
      server.lifecycle.started();
      await ended;
      expect(await status).toBe(200);
      expect([...Buffer.concat(chunks)]).toEqual([0x0a, 0x01, 0x01]); // exists: [true], as loaded
    } finally {
      session.close();
    }
  });
});

describe("the body budget counts every byte held for a call not yet served", () => {
  /** unfinishedHealth starts a health check whose body is sent but never ended. */
  function unfinishedHealth(session: http2.ClientHttp2Session, bytes: number): Promise<string> {
    const stream = session.request({ ":method": "POST", ":path": HEALTH, "content-type": "application/grpc", te: "trailers" });
    stream.write(Buffer.concat([Buffer.from([0, 0, 1, 0, 0]), Buffer.alloc(bytes)]));
    stream.resume();
    stream.on("error", () => undefined);
    return new Promise((resolve) => stream.once("trailers", (t) => resolve(`${t["grpc-status"]} ${decodeURIComponent(String(t["grpc-message"]))}`)));
  }

  it("unfinished health bodies count against --max-buffered-bytes-per-connection", async () => {
    // A body of at most 40,000 bytes, as the options must allow one whole body per connection; a health body is bounded apart.
    const server = await startTestServer({}, undefined, 0, { maxBodyBytes: 40_000, maxBufferedBytesPerConnection: 50_000, maxBufferedBytes: 1 << 20 });
    const session = http2.connect(server.url);
    try {
      void unfinishedHealth(session, 30_000);
      expect(await unfinishedHealth(session, 30_000)).toMatch(/^8 this connection's unfinished requests hold more than 50000 bytes/);
    } finally {
      session.destroy();
    }
  });

  it("bodies that wait out the startup hold stay counted until their call is served", async () => {
    const server = await startTestServer({}, undefined, 0, { starting: true, maxBodyBytes: 100_000, maxBufferedBytes: 150_000 });
    const [a, b] = [http2.connect(server.url), http2.connect(server.url)];
    const body = framed(
      0,
      toBinary(BatchExistsRequestSchema, create(BatchExistsRequestSchema, { keys: Array.from({ length: 900 }, (_, i) => `${i}`.padEnd(98)) })),
    );
    const call = (session: http2.ClientHttp2Session, path: string, bytes: Buffer, sent?: () => void) => {
      const stream = session.request({ ":method": "POST", ":path": path, "content-type": "application/grpc", te: "trailers" });
      stream.end(bytes, sent);
      stream.resume();
      return new Promise<string>((resolve) => {
        stream.once("trailers", (t) => resolve(`${t["grpc-status"]}`));
        stream.once("response", (h) => h["grpc-status"] !== undefined && resolve(`${h["grpc-status"]}`));
      });
    };
    try {
      // The first body (about 90 KB) arrives whole on a, then waits for the state: a health check sent on a after it is answered.
      let waiting: Promise<string> | undefined;
      await new Promise<void>((resolve) => (waiting = call(a, EXISTS, body, resolve)));
      expect(await call(a, HEALTH, framed(0, new Uint8Array()))).toBe("0");
      // It is still counted: a second one on b would make 180 KB of the server's 150 KB.
      expect(await call(b, EXISTS, body)).toBe("8");
      server.lifecycle.started();
      expect(await waiting).toBe("0");
      expect(await call(b, EXISTS, body)).toBe("0"); // given back once served
    } finally {
      a.destroy();
      b.destroy();
    }
  });
});

describe("a call refused before its body was read, over HTTP/1.1", () => {
  it("is answered once its small body has arrived, so the client's body cannot meet a closed connection", async () => {
    const { connect } = await import("node:net");
    const server = await startTestServer({}, undefined, 0, { access: new AccessPolicy(tokenFiles()) });
    const body = JSON.stringify({ keys: ["k"] });
    const socket = connect(server.port, "127.0.0.1");
    await new Promise((resolve) => socket.once("connect", resolve));
    let answer = "";
    let failure = "";
    socket.on("data", (d) => (answer += d));
    socket.on("error", (e) => (failure = e.message));
    const closed = new Promise((resolve) => socket.once("close", resolve));
    socket.write(`POST /keys/batch_exists HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n`);
    // A client slow to send its body (a busy machine): the refusal waits for it.
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(answer).toBe("");
    socket.write(body);
    while (!answer.includes("REASON_UNAUTHENTICATED")) await new Promise((resolve) => socket.once("data", resolve));
    socket.end();
    await closed;
    expect(failure).toBe("");
    expect(answer).toMatch(/^HTTP\/1\.1 401 /);
  });
});
