import { writeFileSync } from "node:fs";
import * as http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { Code, type ConnectError, createClient, type Transport } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { describe, expect, it } from "vitest";
import { ErrorInfoSchema, MetadataService } from "../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { createLeanGrpcTransport } from "../../src/client/lean-grpc-transport.js";
import { SERVER_ID_HEADER } from "../../src/protocol/headers.js";
import { AccessPolicy } from "../../src/service/access-policy.js";
import { tempDir } from "../support/temp-dir.js";
import { freePort, startTestServer } from "../support/test-server.js";

/** answers runs one sequence of calls through a transport and records what a caller sees of each. */
async function answers(transport: Transport): Promise<unknown[]> {
  const client = createClient(MetadataService, transport);
  const out: unknown[] = [];
  const calls: (() => Promise<unknown>)[] = [
    () => client.initializeRank({ rank: 0, numPages: 8, worldSize: 1 }),
    () => client.initializeRank({ rank: 0, numPages: 9, worldSize: 1 }),
    () => client.batchAllocate({ rank: 0, keys: ["a", "b", "ключ"], prefixKeys: ["", "a", "b"] }),
    () => client.confirmWrite({ rank: 0, keys: ["a", "b"], pages: [0, 1] }),
    () => client.confirmWrite({ rank: 0, keys: ["zz"], pages: [5] }),
    () => client.batchExists({ keys: ["a", "b", "ключ", "none"] }),
    () => client.getLocations({ rank: 0, keys: ["a", "none"] }),
    () => client.batchAllocate({ rank: 4, keys: ["a"] }),
    () => client.batchAllocate({ rank: 0, keys: ["x".repeat(5_000)] }),
    () => client.getStats({ allNamespaces: true }),
    () => client.clear({}),
  ];
  for (const call of calls) {
    try {
      const response = (await call()) as { serverId?: string };
      out.push({ response: { ...response, serverId: response.serverId === undefined ? undefined : "id" } });
    } catch (e) {
      const error = e as ConnectError;
      out.push({ code: error.code, message: error.rawMessage, info: error.findDetails(ErrorInfoSchema), id: error.metadata.has(SERVER_ID_HEADER) });
    }
  }
  return out;
}

describe("the lean gRPC transport (the relay's, in place of connect-node's for speed)", () => {
  it("gives what connect-node's gRPC transport gives: responses, codes, messages, ErrorInfo, the server id", async () => {
    const [a, b] = [await startTestServer(), await startTestServer()];
    const viaConnect = await answers(createGrpcTransport({ baseUrl: a.url }));
    const viaLean = await answers(createLeanGrpcTransport({ baseUrl: b.url }));
    expect(viaLean).toEqual(viaConnect);
    expect(viaLean.some((answer) => (answer as { code?: Code }).code === Code.FailedPrecondition)).toBe(true);
  });

  it("sends its header on every call, keeps deadlines and cancellation, and is UNAVAILABLE where no server answers", async () => {
    const file = join(tempDir(), "tokens");
    writeFileSync(file, "secret\n");
    const guarded = await startTestServer({}, undefined, 0, { access: new AccessPolicy({ workerTokenFile: file }) });
    const code = (promise: Promise<unknown>) =>
      promise.then(
        () => Code.Unknown as Code,
        (e: ConnectError) => e.code,
      );
    const bare = createClient(MetadataService, createLeanGrpcTransport({ baseUrl: guarded.url }));
    expect(await code(bare.batchExists({ keys: ["k"] }))).toBe(Code.Unauthenticated);
    const withToken = createClient(MetadataService, createLeanGrpcTransport({ baseUrl: guarded.url, header: { authorization: "Bearer secret" } }));
    expect((await withToken.batchExists({ keys: ["k"] })).exists).toEqual([false]);
    // A server still loading holds calls: the deadline, or the caller's abort, ends the wait.
    const loading = await startTestServer({}, undefined, 0, { starting: true, startupHoldMs: 10_000 });
    const held = createClient(MetadataService, createLeanGrpcTransport({ baseUrl: loading.url }));
    expect(await code(held.batchExists({ keys: ["k"] }, { timeoutMs: 200 }))).toBe(Code.DeadlineExceeded);
    const abort = new AbortController();
    const canceled = code(held.batchExists({ keys: ["k"] }, { signal: abort.signal }));
    setTimeout(() => abort.abort(), 100);
    expect(await canceled).toBe(Code.Canceled);
    const nobody = createClient(MetadataService, createLeanGrpcTransport({ baseUrl: `http://127.0.0.1:${await freePort()}` }));
    expect(await code(nobody.batchExists({ keys: ["k"] }))).toBe(Code.Unavailable);
  });

  it("reads an HTTP error without a gRPC status as connect-node does: 404 (a server without the method) is UNIMPLEMENTED, not sent again", async () => {
    // One bare HTTP/2 server per status, each answering every request with it alone.
    const statuses = [404, 401, 403, 503, 502, 400, 500];
    const servers = await Promise.all(
      statuses.map(async (status) => {
        const server = http2.createServer((_req, res) => {
          res.writeHead(status);
          res.end();
        });
        await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
        return server;
      }),
    );
    try {
      const codes = async (transport: (baseUrl: string) => Transport) => {
        const out: Code[] = [];
        for (const server of servers) {
          const client = createClient(MetadataService, transport(`http://127.0.0.1:${(server.address() as AddressInfo).port}`));
          out.push(
            await client.batchExists({ keys: ["k"] }).then(
              () => Code.Unknown as Code,
              (e: ConnectError) => e.code,
            ),
          );
        }
        return out;
      };
      const lean = await codes((baseUrl) => createLeanGrpcTransport({ baseUrl }));
      expect(lean).toEqual(await codes((baseUrl) => createGrpcTransport({ baseUrl })));
      expect(lean[0]).toBe(Code.Unimplemented);
    } finally {
      for (const server of servers) server.close();
    }
  });
});
