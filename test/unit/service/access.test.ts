import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { ConnectError, createClient, type Transport } from "@connectrpc/connect";
import { codeToString } from "@connectrpc/connect/protocol-connect";
import { compressionGzip, createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { describe, expect, it } from "vitest";
import { ErrorInfoSchema, MetadataService, Reason, ReasonSchema } from "../../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { AccessPolicy } from "../../../src/service/access-policy.js";
import { tempDir } from "../../support/temp-dir.js";
import { startTestServer } from "../../support/test-server.js";

/** A call of one kind (worker: GetLocations; admin: DeleteKeys or a JSON clear) with an authorization header or none. */
type Call = (url: string, authorization: string | undefined) => Promise<string>;

const reasonName = (reason: Reason) => ReasonSchema.values.find((v) => v.number === reason)!.name;

function viaClient(transport: (url: string) => Transport, admin: boolean): Call {
  return async (url, authorization) => {
    const client = createClient(MetadataService, transport(url));
    const headers = authorization === undefined ? undefined : { authorization };
    const call = admin ? client.deleteKeys({ keys: ["k"] }, { headers }) : client.getLocations({ rank: 0, keys: ["k"] }, { headers });
    const error = await call.then(
      () => undefined,
      (e: unknown) => ConnectError.from(e),
    );
    if (error === undefined) return "ok";
    return `${codeToString(error.code)} ${reasonName(error.findDetails(ErrorInfoSchema)[0]?.reason ?? Reason.UNSPECIFIED)}`;
  };
}

function viaJson(path: string, body: object): Call {
  return async (url, authorization) => {
    const headers: Record<string, string> = { "content-type": "application/json" };
    if (authorization !== undefined) headers.authorization = authorization;
    const res = await fetch(url + path, { method: "POST", headers, body: JSON.stringify(body) });
    if (res.status < 300) return "ok";
    const error = (await res.json()) as { code: string; reason: string };
    return `${error.code} ${error.reason} ${res.status}`;
  };
}

const TRANSPORTS: [string, (baseUrl: string) => Transport][] = [
  ["gRPC (fast path)", (baseUrl) => createGrpcTransport({ baseUrl })],
  ["gRPC, compressed (connect-node)", (baseUrl) => createGrpcTransport({ baseUrl, sendCompression: compressionGzip, compressMinBytes: 0 })],
  ["Connect", (baseUrl) => createConnectTransport({ baseUrl, httpVersion: "1.1" })],
  ["gRPC-Web", (baseUrl) => createGrpcWebTransport({ baseUrl, httpVersion: "1.1" })],
];

/** FRAMINGS: each framing's worker call and admin call. */
const FRAMINGS: [string, Call, Call][] = [
  ...TRANSPORTS.map(([name, transport]) => [name, viaClient(transport, false), viaClient(transport, true)] as [string, Call, Call]),
  ["vLLM JSON", viaJson("/keys/get_locations", { rank: 0, keys: ["k"] }), viaJson("/clear", {})],
  ["SGLang JSON", viaJson("/0/get_page_indices", { keys: ["k"] }), viaJson("/0/delete_keys", { keys: ["k"] })],
];

function tokenFiles() {
  const dir = tempDir();
  const workerTokenFile = join(dir, "workers");
  const adminTokenFile = join(dir, "admins");
  writeFileSync(workerTokenFile, "# workers\n\nworker-token-1\n  worker-token-2  \n");
  writeFileSync(adminTokenFile, "admin-token\n");
  return { workerTokenFile, adminTokenFile };
}

const UNAUTHENTICATED = (json: boolean) => `unauthenticated REASON_UNAUTHENTICATED${json ? " 401" : ""}`;
const DENIED = (json: boolean) => `permission_denied REASON_PERMISSION_DENIED${json ? " 403" : ""}`;

describe("with token files, every framing", () => {
  it.each(FRAMINGS)("%s: needs a known token, and an admin token for admin calls", async (name, worker, admin) => {
    const files = tokenFiles();
    const access = new AccessPolicy(files);
    const server = await startTestServer({}, undefined, 0, { access });
    server.state.initializeRank("", 0, 8, 1);
    const json = name.includes("JSON");
    expect(await worker(server.url, undefined)).toBe(UNAUTHENTICATED(json));
    expect(await worker(server.url, "Bearer nope")).toBe(UNAUTHENTICATED(json));
    expect(await worker(server.url, "worker-token-1")).toBe(UNAUTHENTICATED(json)); // not a Bearer header
    expect(await worker(server.url, "Bearer worker-token-1")).toBe("ok");
    expect(await worker(server.url, "Bearer worker-token-2")).toBe("ok");
    expect(await worker(server.url, "Bearer admin-token")).toBe("ok");
    expect(await admin(server.url, undefined)).toBe(UNAUTHENTICATED(json));
    expect(await admin(server.url, "Bearer worker-token-1")).toBe(DENIED(json));
    expect(await admin(server.url, "Bearer admin-token")).toBe("ok");

    // A token added, another removed, then reload (what SIGHUP does).
    writeFileSync(files.workerTokenFile, "worker-token-3\n");
    access.reload();
    expect(await worker(server.url, "Bearer worker-token-1")).toBe(UNAUTHENTICATED(json));
    expect(await worker(server.url, "Bearer worker-token-3")).toBe("ok");
  });
});

describe("AccessPolicy", () => {
  it("without an admin file lets any token do everything; with only an admin file, leaves worker calls open", () => {
    const { workerTokenFile, adminTokenFile } = tokenFiles();
    expect(() => new AccessPolicy({ workerTokenFile }).check("Clear", "Bearer worker-token-1")).not.toThrow();
    const adminOnly = new AccessPolicy({ adminTokenFile });
    expect(() => adminOnly.check("GetLocations", undefined)).not.toThrow();
    expect(() => adminOnly.check("Clear", undefined)).toThrow(/needs a token/);
    expect(() => adminOnly.check("metrics", undefined, true)).toThrow(/needs a token/);
  });

  it("takes a token with white space around the header's value, as HTTP/1.1 servers do, on every protocol", () => {
    const { workerTokenFile } = tokenFiles();
    const access = new AccessPolicy({ workerTokenFile });
    for (const header of ["Bearer worker-token-1", "  Bearer worker-token-1", "Bearer worker-token-1 \t", "\tbearer  worker-token-1 "]) {
      expect(() => access.check("GetLocations", header)).not.toThrow();
    }
    expect(() => access.check("GetLocations", "Bearer worker-token-1 x")).toThrow(/needs a token/);
  });

  it("lets only an admin token drop a rank", () => {
    const { workerTokenFile, adminTokenFile } = tokenFiles();
    const access = new AccessPolicy({ workerTokenFile, adminTokenFile });
    for (const method of ["DropRank", "vllm.drop_rank"]) {
      expect(() => access.check(method, "Bearer worker-token-1")).toThrow(/needs an admin token/);
      expect(() => access.check(method, "Bearer admin-token")).not.toThrow();
    }
  });

  it("lets a clear token make every worker call and clear or delete keys, but never drop a rank, reset or take a snapshot", () => {
    const { workerTokenFile, adminTokenFile } = tokenFiles();
    const clearTokenFile = join(tempDir(), "clears");
    writeFileSync(clearTokenFile, "clear-token\n");
    const access = new AccessPolicy({ workerTokenFile, adminTokenFile, clearTokenFile });
    for (const method of ["GetLocations", "BatchAllocate", "vllm.batch_exists", "Clear", "DeleteKeys", "vllm.clear", "sglang.clear", "sglang.delete_keys"]) {
      expect(() => access.check(method, "Bearer clear-token"), method).not.toThrow();
    }
    for (const method of ["DropRank", "ResetNamespace", "vllm.drop_rank", "vllm.reset", "replication.Snapshot", "replication.Forget"]) {
      expect(() => access.check(method, "Bearer clear-token"), method).toThrow(/needs an admin token \(--admin-token-file\); this is a clear token/);
      expect(() => access.check(method, "Bearer admin-token"), method).not.toThrow();
    }
    expect(() => access.check("Clear", "Bearer worker-token-1")).toThrow(/needs an admin token/);
    expect(access.reload()).toEqual({ worker: 2, admin: 1, clear: 1 });
  });

  it("lets only an admin token take a snapshot while tokens are in force, even without an admin file", () => {
    const { workerTokenFile, adminTokenFile } = tokenFiles();
    expect(() => new AccessPolicy({ workerTokenFile }).check("replication.Snapshot", "Bearer worker-token-1")).toThrow(/needs an admin token/);
    expect(() => new AccessPolicy({ workerTokenFile, adminTokenFile }).check("replication.Snapshot", "Bearer worker-token-1")).toThrow(/needs an admin token/);
    expect(() => new AccessPolicy({ workerTokenFile, adminTokenFile }).check("replication.Snapshot", "Bearer admin-token")).not.toThrow();
    expect(() => new AccessPolicy({ workerTokenFile }).check("replication.Status", "Bearer worker-token-1")).not.toThrow();
  });

  it("refuses a file it cannot read or without a token, and keeps its tokens when a reload fails", () => {
    const { workerTokenFile } = tokenFiles();
    expect(() => new AccessPolicy({ workerTokenFile: "/nonexistent/tokens" })).toThrow(/cannot read the token file \/nonexistent\/tokens/);
    writeFileSync(`${workerTokenFile}.empty`, "# none yet\n\n");
    expect(() => new AccessPolicy({ workerTokenFile: `${workerTokenFile}.empty` })).toThrow(/holds no token/);
    const access = new AccessPolicy({ workerTokenFile });
    writeFileSync(workerTokenFile, "\n");
    expect(() => access.reload()).toThrow(/holds no token/);
    expect(() => access.check("GetLocations", "Bearer worker-token-1")).not.toThrow();
  });
});
