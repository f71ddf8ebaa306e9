import { execFile } from "node:child_process";
import { writeFileSync } from "node:fs";
import * as http2 from "node:http2";
import { join } from "node:path";
import { promisify } from "node:util";
import { gzipSync } from "node:zlib";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { Code, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { describe, expect, it } from "vitest";
import {
  Health,
  HealthCheckRequestSchema,
  HealthCheckResponseSchema,
  HealthCheckResponse_ServingStatus as ServingStatus,
} from "../../../gen/grpc/health/v1/health_pb.js";
import { createMetadataClient } from "../../../src/client/index.js";
import { GrpcUnaryFastPath } from "../../../src/framing/grpc/grpc-unary-fast-path.js";
import { AccessPolicy } from "../../../src/service/access-policy.js";
import { OPEN_BODY_BYTES } from "../../../src/service/edge.js";
import { healthService } from "../../../src/service/health-service.js";
import { Lifecycle } from "../../../src/service/lifecycle.js";
import { LmdbStore } from "../../../src/store/lmdb-store.js";
import { FailingStore } from "../../support/failing-store.js";
import { tempDir } from "../../support/temp-dir.js";
import { startTestServer } from "../../support/test-server.js";

const exec = promisify(execFile);
const BUF = new URL("../../../node_modules/.bin/buf", import.meta.url).pathname;
const METADATA = "hf3fs.metadata.v1.MetadataService";

describe("gRPC health checking", () => {
  it("answers SERVING for the server and MetadataService, NOT_FOUND for another service", async () => {
    const server = await startTestServer();
    const health = createClient(Health, createGrpcTransport({ baseUrl: server.url }));
    expect((await health.check({})).status).toBe(ServingStatus.SERVING);
    expect((await health.check({ service: METADATA })).status).toBe(ServingStatus.SERVING);
    await expect(health.check({ service: "no.Such" })).rejects.toMatchObject({ code: Code.NotFound });
  });

  it("turns NOT_SERVING when the store fails, and Watch tells it", async () => {
    const store = new FailingStore(await LmdbStore.open(tempDir()));
    const server = await startTestServer({}, store);
    const health = createClient(Health, createGrpcTransport({ baseUrl: server.url }));
    const seen: ServingStatus[] = [];
    const watching = (async () => {
      for await (const update of health.watch({ service: METADATA })) seen.push(update.status);
    })();
    await new Promise((resolve) => setTimeout(resolve, 100));
    store.breakNow();
    await createMetadataClient({ baseUrl: server.url, retry: { deadlineMs: 0 } })
      .initializeRank({ rank: 0, numPages: 1 })
      .catch(() => undefined);
    await watching;
    expect(seen).toEqual([ServingStatus.SERVING, ServingStatus.NOT_SERVING]);
    expect((await health.check({})).status).toBe(ServingStatus.NOT_SERVING);
    await store.close();
  });
});

/** rawCheck sends one Health.Check over plain HTTP/2 (message bytes `message`, gzip-flagged when `gzip`) and reads what comes back. */
async function rawCheck(url: string, message: Uint8Array, init: { gzip?: boolean; token?: string } = {}) {
  const session = http2.connect(url);
  try {
    const body = init.gzip ? gzipSync(message) : message;
    const frame = Buffer.alloc(5 + body.length);
    frame[0] = init.gzip ? 1 : 0;
    frame.writeUInt32BE(body.length, 1);
    frame.set(body, 5);
    const stream = session.request({
      ":method": "POST",
      ":path": `/${Health.typeName}/Check`,
      "content-type": "application/grpc",
      te: "trailers",
      ...(init.gzip && { "grpc-encoding": "gzip" }),
      ...(init.token && { authorization: `Bearer ${init.token}` }),
    });
    const [headers, trailers, chunks] = await new Promise<[http2.IncomingHttpHeaders, http2.IncomingHttpHeaders, Buffer[]]>((resolve, reject) => {
      const chunks: Buffer[] = [];
      let headers: http2.IncomingHttpHeaders = {};
      stream.on("response", (h) => (headers = h));
      stream.on("data", (chunk: Buffer) => chunks.push(chunk));
      stream.on("trailers", (t) => resolve([headers, t, chunks]));
      stream.on("error", reject);
      stream.end(frame);
    });
    const answer = Buffer.concat(chunks);
    const status = answer.length > 5 ? fromBinary(HealthCheckResponseSchema, answer.subarray(5)).status : undefined;
    return { status, code: Number(trailers["grpc-status"] ?? headers["grpc-status"]) };
  } finally {
    session.close();
  }
}

describe("gRPC health checking on the fast path", () => {
  it("answers a plain Check as connect-node answers a compressed one, without a token, within the open services' body limit", async () => {
    const workerTokenFile = join(tempDir(), "workers");
    writeFileSync(workerTokenFile, "worker-token\n");
    const server = await startTestServer({}, undefined, 0, { access: new AccessPolicy({ workerTokenFile }) });
    const check = (service: string) => toBinary(HealthCheckRequestSchema, create(HealthCheckRequestSchema, { service }));
    // Plain gRPC is the fast path's; compressed, connect-node's: the same answers, no token asked.
    const plain = { httpVersionMajor: 2, method: "POST", url: `/${Health.typeName}/Check`, headers: { "content-type": "application/grpc" } };
    expect(new GrpcUnaryFastPath({} as never, undefined as never, healthService(new Lifecycle(), [])).route(plain as never)).toBeDefined();
    expect(new GrpcUnaryFastPath({} as never, undefined as never).route(plain as never)).toBeUndefined();
    for (const gzip of [false, true]) {
      expect(await rawCheck(server.url, check(METADATA), { gzip })).toEqual({ code: 0, status: ServingStatus.SERVING });
      expect(await rawCheck(server.url, check("no.Such"), { gzip })).toMatchObject({ code: Code.NotFound, status: undefined });
    }
    // A body past OPEN_BODY_BYTES is refused before it is decoded; a malformed one is INVALID_ARGUMENT.
    expect((await rawCheck(server.url, check("x".repeat(OPEN_BODY_BYTES)))).code).toBe(Code.ResourceExhausted);
    expect((await rawCheck(server.url, Buffer.from([0x0a, 0x05, 0x61]))).code).toBe(Code.InvalidArgument);
  });
});

describe("gRPC server reflection", () => {
  it("lets buf curl list the services and call an RPC without a schema", async () => {
    const server = await startTestServer();
    const flags = ["--http2-prior-knowledge", "--protocol", "grpc"];
    const { stdout: services } = await exec(BUF, ["curl", ...flags, "--list-services", server.url]);
    expect(services.split("\n")).toEqual(expect.arrayContaining([METADATA, "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection"]));
    const { stdout: methods } = await exec(BUF, ["curl", ...flags, "--list-methods", server.url]);
    expect(methods).toContain(`${METADATA}/BatchAllocate`);
    const { stdout } = await exec(BUF, ["curl", ...flags, "-d", '{"rank": 3, "num_pages": 16}', `${server.url}/${METADATA}/InitializeRank`]);
    expect(JSON.parse(stdout)).toMatchObject({ created: true, numPages: 16 });
  });

  it("answers the v1alpha protocol that older tools ask for", async () => {
    const server = await startTestServer();
    const { stdout } = await exec(BUF, [
      "curl",
      "--http2-prior-knowledge",
      "--protocol",
      "grpc",
      "--reflect-protocol",
      "grpc-v1alpha",
      "--list-services",
      server.url,
    ]);
    expect(stdout).toContain(METADATA);
  });
});

describe("GET /metrics", () => {
  it("exposes calls by method and code, latency, and pages and keys per namespace and rank", async () => {
    const server = await startTestServer();
    const client = createMetadataClient({ baseUrl: server.url, retry: { deadlineMs: 0 } });
    await client.initializeRank({ namespace: "m", rank: 2, numPages: 10, worldSize: 3 });
    const { pages } = await client.batchAllocate({ namespace: "m", rank: 2, keys: ["a", "b"] });
    await client.confirmWrite({ namespace: "m", rank: 2, keys: ["a"], pages: [pages[0]!] });
    await client.batchAllocate({ namespace: "m", rank: 7, keys: ["a"] }).catch(() => undefined);
    await fetch(`${server.url}/0/exists`, { method: "POST", body: JSON.stringify({ keys: [] }) });
    const res = await fetch(`${server.url}/metrics`);
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(text).toContain('hf3fs_metadata_calls_total{method="BatchAllocate",code="ok"} 1');
    // The client re-initializes its ranks on RANK_NOT_INITIALIZED and retries once: two failures, two inits.
    expect(text).toContain('hf3fs_metadata_calls_total{method="BatchAllocate",code="failed_precondition"} 2');
    expect(text).toContain('hf3fs_metadata_calls_total{method="InitializeRank",code="ok"} 2');
    expect(text).toContain('hf3fs_metadata_calls_total{method="sglang.exists",code="failed_precondition"} 1');
    expect(text).toContain('hf3fs_metadata_call_duration_seconds_count{method="ConfirmWrite"} 1');
    expect(text).toContain('hf3fs_metadata_pages{namespace="m",rank="2",state="free"} 8');
    expect(text).toContain('hf3fs_metadata_pages{namespace="m",rank="2",state="reserved"} 1');
    expect(text).toContain('hf3fs_metadata_pages{namespace="m",rank="2",state="used"} 1');
    expect(text).toContain('hf3fs_metadata_keys{namespace="m"} 1');
    expect(text).toContain('hf3fs_metadata_complete_keys{namespace="m"} 0');
    expect(text).toContain("hf3fs_metadata_evictions_total");
    expect(text).toContain("hf3fs_metadata_store_commit_changes_count");
  });
});
