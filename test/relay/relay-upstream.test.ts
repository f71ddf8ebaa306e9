import { once } from "node:events";
import { writeFileSync } from "node:fs";
import * as http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { create, toBinary } from "@bufbuild/protobuf";
import { Code, type ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { describe, expect, it } from "vitest";
import { Health, HealthCheckResponse_ServingStatus as ServingStatus } from "../../gen/grpc/health/v1/health_pb.js";
import { BatchAllocateRequestSchema, ErrorInfoSchema, MetadataService, Reason } from "../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { envelope } from "../../src/protocol/envelope.js";
import { AccessPolicy } from "../../src/service/access-policy.js";
import { Leadership } from "../../src/service/leadership.js";
import { tempDir } from "../support/temp-dir.js";
import { startTestRelay } from "../support/test-relay.js";
import { freePort, startTestServer } from "../support/test-server.js";
import { until } from "../support/until.js";

/** status is the relay's health of a service. */
async function status(url: string, service: string): Promise<ServingStatus> {
  return (await createClient(Health, createGrpcTransport({ baseUrl: url })).check({ service })).status;
}

const exists = (url: string, headers: Record<string, string> = {}) =>
  fetch(`${url}/keys/batch_exists`, { method: "POST", body: JSON.stringify({ keys: ["k"] }), headers });

const allocate = (url: string) => fetch(`${url}/keys/batch_allocate`, { method: "POST", body: JSON.stringify({ rank: 0, keys: [["k", null]] }) });

const post = (url: string, path: string, body: unknown) => fetch(`${url}${path}`, { method: "POST", body: JSON.stringify(body) });

describe("a relay with no upstream to reach", () => {
  it("holds calls up to --hold, then answers 503 and UNAVAILABLE REASON_UPSTREAM_UNAVAILABLE; health is NOT_SERVING", async () => {
    const relay = await startTestRelay(`http://127.0.0.1:${await freePort()}`, { holdMs: 600 });
    const started = performance.now();
    const res = await allocate(relay.url);
    expect(performance.now() - started).toBeGreaterThan(300); // held, not refused at once (the hold's last backoff may cut it short)
    expect(res.status).toBe(503);
    expect(await res.json()).toMatchObject({ reason: "REASON_UPSTREAM_UNAVAILABLE", code: "unavailable" });
    const error = (await createClient(MetadataService, createGrpcTransport({ baseUrl: relay.url }))
      .batchAllocate({ rank: 0, keys: ["k"] })
      .catch((e: ConnectError) => e)) as ConnectError;
    expect(error.code).toBe(Code.Unavailable);
    expect(error.findDetails(ErrorInfoSchema)[0]?.reason).toBe(Reason.UPSTREAM_UNAVAILABLE);
    for (const service of ["", MetadataService.typeName]) expect(await status(relay.url, service)).toBe(ServingStatus.NOT_SERVING);
  });

  it("answers lookups as misses once no server answered calls for --read-hold (hf3fs-unreached), while writes wait for one; then lookups are answered again", async () => {
    const port = await freePort();
    const relay = await startTestRelay(`http://127.0.0.1:${port}`, { holdMs: 60_000, readHoldMs: 300 });
    // vLLM's scheduler, SGLang's prefetcher and a gRPC caller: every key a miss, marked, instead of a wait of --hold.
    const vllm = await post(relay.url, "/keys/batch_exists", { keys: ["a", "b", "c"] });
    expect([vllm.status, await vllm.json(), vllm.headers.get("hf3fs-unreached")]).toEqual([200, { exists: [false, false, false] }, "1"]);
    const sglang = await post(relay.url, "/0/exists", { namespace: "sg", keys: ["x"] });
    expect([sglang.status, await sglang.json(), sglang.headers.get("hf3fs-unreached")]).toEqual([200, { exists: [false] }, "1"]);
    let mark: string | null = null;
    const client = createClient(MetadataService, createGrpcTransport({ baseUrl: relay.url }));
    const { exists: flags } = await client.batchExists({ keys: ["a", "b"] }, { onHeader: (h) => (mark = h.get("hf3fs-unreached")) });
    expect([flags, mark]).toEqual([[false, false], "1"]);
    // A worker's lookup before its load: no page, so it recomputes instead of waiting.
    const located = await post(relay.url, "/keys/get_locations", { rank: 0, keys: ["a", "b"] });
    expect([located.status, await located.json(), located.headers.get("hf3fs-unreached")]).toEqual([200, { locations: [null, null] }, "1"]);
    // A write is held meanwhile (--hold), and answered once a server comes up.
    const initialized = post(relay.url, "/rank/0/initialize", { num_pages: 8 });
    const stillHeld = await Promise.race([initialized.then(() => false), post(relay.url, "/keys/batch_exists", { keys: ["a"] }).then(() => true)]);
    expect(stillHeld).toBe(true);
    await startTestServer({}, undefined, port);
    expect((await initialized).status).toBe(200);
    // Lookups are a server's again once the relay's watch finds one that answers calls (its health SERVING).
    await until(async () => (await status(relay.url, MetadataService.typeName)) === ServingStatus.SERVING);
    const { pages } = await client.batchAllocate({ rank: 0, keys: ["a"] });
    await client.confirmWrite({ rank: 0, keys: ["a"], pages });
    const answered = await post(relay.url, "/keys/batch_exists", { keys: ["a", "b"] });
    expect([await answered.json(), answered.headers.get("hf3fs-unreached")]).toEqual([{ exists: [true, false] }, null]);
    const metrics = await (await fetch(`${relay.url}/metrics`)).text();
    expect(metrics).toContain('hf3fs_relay_unreached_lookups_total{method="batchExists"} 4');
    expect(metrics).toContain('hf3fs_relay_unreached_lookups_total{method="getLocations"} 1');
  });

  it("holds lookups as any call with --read-hold 0", async () => {
    const relay = await startTestRelay(`http://127.0.0.1:${await freePort()}`, { holdMs: 600, readHoldMs: 0 });
    const res = await exists(relay.url);
    expect(res.status).toBe(503);
    expect(await res.json()).toMatchObject({ reason: "REASON_UPSTREAM_UNAVAILABLE" });
  });

  it("answers a held call once the server comes up within the hold, and turns SERVING", async () => {
    const port = await freePort();
    const relay = await startTestRelay(`http://127.0.0.1:${port}`, { holdMs: 10_000, readHoldMs: 0 });
    const held = exists(relay.url);
    await new Promise((resolve) => setTimeout(resolve, 300));
    await startTestServer({}, undefined, port);
    const res = await held;
    expect([res.status, await res.json()]).toEqual([200, { exists: [false] }]);
    await until(async () => (await status(relay.url, MetadataService.typeName)) === ServingStatus.SERVING);
    expect(await status(relay.url, "")).toBe(ServingStatus.SERVING);
    const metrics = await (await fetch(`${relay.url}/metrics`)).text();
    expect(metrics).toMatch(/hf3fs_relay_upstream_retries_total [1-9]/);
    expect(metrics).toMatch(/hf3fs_relay_held_seconds_count [1-9]/);
    expect(metrics).toContain('hf3fs_relay_calls_total{method="vllm.batch_exists",code="ok"} 1');
    expect(metrics).toContain("hf3fs_relay_upstream_reachable 1");
    expect(metrics).toMatch(/^hf3fs_relay_connections_total [1-9]/m); // its callers' (the test's), as a server counts its own
    expect(metrics).toMatch(/^hf3fs_relay_open_connections [1-9]/m);
  });
});

/** statusWithin sends a BatchAllocate with grpc-timeout `timeout` and no deadline of its own, and returns the grpc-status answered. */
async function statusWithin(url: string, timeout: string): Promise<string> {
  const session = http2.connect(url);
  try {
    const stream = session.request({
      ":method": "POST",
      ":path": `/${MetadataService.typeName}/BatchAllocate`,
      "content-type": "application/grpc",
      "grpc-timeout": timeout,
    });
    stream.end(envelope(toBinary(BatchAllocateRequestSchema, create(BatchAllocateRequestSchema, { rank: 0, keys: ["k"] }))));
    stream.resume();
    return await new Promise<string>((resolve) => {
      // A trailers-only answer carries its status in its headers.
      stream.once("response", (headers) => headers["grpc-status"] !== undefined && resolve(String(headers["grpc-status"])));
      stream.once("trailers", (trailers) => resolve(String(trailers["grpc-status"])));
    });
  } finally {
    session.destroy();
  }
}

describe("a relay's caller with a deadline (grpc-timeout)", () => {
  it("is answered DEADLINE_EXCEEDED once it passes, whether no upstream answers or one holds the call, not CANCELED", async () => {
    const silent = http2.createServer();
    silent.on("stream", () => undefined); // takes every call and never answers it
    silent.listen(0, "127.0.0.1");
    await once(silent, "listening");
    const absent = await startTestRelay(`http://127.0.0.1:${await freePort()}`, { holdMs: 600_000 });
    const holding = await startTestRelay(`http://127.0.0.1:${(silent.address() as AddressInfo).port}`, { holdMs: 600_000 });
    expect([await statusWithin(absent.url, "300m"), await statusWithin(holding.url, "300m")]).toEqual([
      String(Code.DeadlineExceeded),
      String(Code.DeadlineExceeded),
    ]);
    silent.close();
  });
});

describe("a relay whose caller leaves", () => {
  it.each([
    ["vLLM JSON", "/keys/batch_exists", "application/json", JSON.stringify({ keys: ["k"] })],
    ["Connect JSON", "/hf3fs.metadata.v1.MetadataService/BatchExists", "application/json", JSON.stringify({ keys: ["k"] })],
  ])("ends the call upstream (%s): the upstream's stream is cancelled, not held for --hold", async (_, path, contentType, body) => {
    // An upstream that takes every call and never answers: the relay waits on it until its caller leaves.
    // (The relay's health probes come too, and time out by themselves: only the call's stream counts.)
    const upstream = http2.createServer();
    let reachedCall!: () => void;
    const reached = new Promise<void>((resolve) => (reachedCall = resolve));
    const cancelled = new Promise<void>((resolve) =>
      upstream.on("stream", (stream, headers) => {
        if (!String(headers[":path"]).endsWith("/BatchExists")) return;
        reachedCall();
        stream.once("close", () => resolve());
      }),
    );
    upstream.listen(0, "127.0.0.1");
    await once(upstream, "listening");
    const relay = await startTestRelay(`http://127.0.0.1:${(upstream.address() as AddressInfo).port}`, { holdMs: 600_000 });
    const caller = new AbortController();
    fetch(`${relay.url}${path}`, { method: "POST", body, headers: { "content-type": contentType }, signal: caller.signal }).catch(() => undefined);
    await reached;
    caller.abort();
    await cancelled; // the test's timeout fails it when the relay keeps the upstream call
    upstream.close();
  });
});

describe("a relay's tokens", () => {
  it("sends its upstream token for callers that have none, and asks its own callers for its own", async () => {
    const dir = tempDir();
    const file = (name: string, token: string) => {
      writeFileSync(join(dir, name), `${token}\n`);
      return join(dir, name);
    };
    const server = await startTestServer({}, undefined, 0, { access: new AccessPolicy({ workerTokenFile: file("upstream", "up-secret") }) });
    expect((await exists(server.url)).status).toBe(401); // the server wants its token
    const open = await startTestRelay(server.url, { upstreamToken: "up-secret" });
    expect((await exists(open.url)).status).toBe(200); // an engine with no token, through the relay
    const guarded = await startTestRelay(server.url, { upstreamToken: "up-secret", access: new AccessPolicy({ workerTokenFile: file("own", "own-secret") }) });
    expect((await exists(guarded.url)).status).toBe(401);
    expect((await exists(guarded.url, { authorization: "Bearer up-secret" })).status).toBe(401); // the upstream's token is not the relay's
    expect((await exists(guarded.url, { authorization: "Bearer own-secret" })).status).toBe(200);
    const wrong = await startTestRelay(server.url, { upstreamToken: "not-it", holdMs: 300 });
    const refused = await exists(wrong.url);
    expect([refused.status, ((await refused.json()) as { reason: string }).reason]).toEqual([401, "REASON_UNAUTHENTICATED"]); // the server's answer, passed on
  });

  it("pass engines' clear on with a clear token upstream, and refuse reset and drop there (no admin token on the node)", async () => {
    const dir = tempDir();
    const file = (name: string, token: string) => {
      writeFileSync(join(dir, name), `${token}\n`);
      return join(dir, name);
    };
    const access = new AccessPolicy({ workerTokenFile: file("workers", "w"), adminTokenFile: file("admins", "a"), clearTokenFile: file("clears", "c") });
    const server = await startTestServer({}, undefined, 0, { access });
    server.state.initializeRank("kv", 0, 8, 1);
    const relay = await startTestRelay(server.url, { upstreamToken: "c" });
    const post = async (path: string, body: object) => {
      const res = await fetch(`${relay.url}${path}`, { method: "POST", body: JSON.stringify(body) });
      return `${res.status} ${res.status < 300 ? "" : ((await res.json()) as { reason: string }).reason}`.trim();
    };
    expect(await post("/clear", {})).toBe("204");
    expect(await post("/reset", { namespace: "kv", force: true })).toBe("403 REASON_PERMISSION_DENIED");
    expect(await post("/rank/0/drop", {})).toBe("403 REASON_PERMISSION_DENIED");
    expect(server.state.stats("kv")[0]!.ranks).toHaveLength(1); // neither took effect
  });

  it("guard its status page as they guard GetStats: the upstream's namespaces are not shown to a caller without a token", async () => {
    const dir = tempDir();
    writeFileSync(join(dir, "upstream"), "up-secret\n");
    writeFileSync(join(dir, "own"), "own-secret\n");
    const access = (file: string) => new AccessPolicy({ workerTokenFile: join(dir, file) });
    const server = await startTestServer({}, undefined, 0, { access: access("upstream") });
    server.state.initializeRank("private-model", 0, 8, 1);
    const relay = await startTestRelay(server.url, { upstreamToken: "up-secret", access: access("own") });
    for (const url of [server.url, relay.url]) {
      for (const path of ["/status.json", "/"]) expect((await fetch(`${url}${path}`)).status, `${url}${path}`).toBe(401);
    }
    const shown = await fetch(`${relay.url}/status.json`, { headers: { authorization: "Bearer own-secret" } });
    expect(await shown.text()).toContain("private-model");
    expect((await fetch(`${relay.url}/status.json?token=own-secret`)).status).toBe(200);
  });
});

describe("a relay told of a leader outside its --upstream", () => {
  it("does not follow it: the calls, and the upstream token they carry, stay with its own members", async () => {
    const elsewhere = http2.createServer();
    const reached: string[] = [];
    elsewhere.on("stream", (stream, headers) => {
      reached.push(`${headers[":path"]} ${headers.authorization ?? ""}`);
      stream.close(http2.constants.NGHTTP2_REFUSED_STREAM);
    });
    elsewhere.listen(0, "127.0.0.1");
    await once(elsewhere, "listening");
    const leadership = new Leadership();
    leadership.follow(`http://127.0.0.1:${(elsewhere.address() as AddressInfo).port}`, true);
    const standby = await startTestServer({}, undefined, 0, { leadership, standbyCalls: "refuse" });
    const relay = await startTestRelay(standby.url, { upstreamToken: "up-secret", holdMs: 500 });
    const res = await exists(relay.url);
    expect(res.status).toBe(503);
    expect(await res.json()).toMatchObject({ reason: "REASON_UPSTREAM_UNAVAILABLE" });
    expect(reached).toEqual([]);
    elsewhere.close();
  });
});
