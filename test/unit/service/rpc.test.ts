import { create, type DescMessage, fromBinary, type MessageInitShape, type MessageShape, toBinary } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import * as grpc from "@grpc/grpc-js";
import { describe, expect, it } from "vitest";
import {
  AllocationStatus,
  BatchAllocateRequestSchema,
  BatchAllocateResponseSchema,
  ConfirmWriteRequestSchema,
  ConfirmWriteResponseSchema,
  ErrorInfoSchema,
  InitializeRankRequestSchema,
  InitializeRankResponseSchema,
  MetadataService,
  Reason,
} from "../../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { createMetadataClient } from "../../../src/client/index.js";
import { LmdbStore } from "../../../src/store/lmdb-store.js";
import { FailingStore } from "../../support/failing-store.js";
import { tempDir } from "../../support/temp-dir.js";
import { startTestServer } from "../../support/test-server.js";

const protocols = [
  { protocol: "grpc", httpVersion: "2" },
  { protocol: "connect", httpVersion: "1.1" },
  { protocol: "connect", httpVersion: "2" },
  { protocol: "grpc-web", httpVersion: "1.1" },
] as const;

async function expectError(call: Promise<unknown>, code: Code, reason: Reason) {
  const error = await call.then(
    () => undefined,
    (e: unknown) => ConnectError.from(e),
  );
  expect(error, "the call should fail").toBeDefined();
  expect(error!.code).toBe(code);
  const [info] = error!.findDetails(ErrorInfoSchema);
  expect(info?.reason).toBe(reason);
  // Headers and trailers both carry the id; the client merges them.
  for (const id of error!.metadata.get("hf3fs-server-id")!.split(", ")) expect(id).toMatch(/^[0-9a-f-]{36}$/);
  return info!;
}

describe.each(protocols)("MetadataService over $protocol (HTTP/$httpVersion)", ({ protocol, httpVersion }) => {
  it("runs a full worker cycle", async () => {
    const server = await startTestServer();
    const client = createMetadataClient({ baseUrl: server.url, protocol, httpVersion, retry: { deadlineMs: 0 } });
    const init = await client.initializeRank({ rank: 0, numPages: 16, worldSize: 1 });
    expect(init).toMatchObject({ created: true, numPages: 16, freePages: 16, serverId: server.store.serverId });
    expect(client.serverId).toBe(server.store.serverId);
    const alloc = await client.batchAllocate({ rank: 0, keys: ["a", "b"], prefixKeys: ["", "a"] });
    expect(alloc.statuses).toEqual([AllocationStatus.NEW, AllocationStatus.NEW]);
    const confirm = await client.confirmWrite({ rank: 0, keys: ["a", "b"], pages: alloc.pages });
    expect(confirm).toMatchObject({ confirmed: 2, released: 0, completed: [0, 1] });
    expect((await client.batchExists({ keys: ["a", "b", "c"] })).exists).toEqual([true, true, false]);
    expect((await client.getLocations({ rank: 0, keys: ["b", "c"] })).pages).toEqual([alloc.pages[1], -1]);
    expect((await client.deleteKeys({ keys: ["a"] })).deleted).toBe(1);
    const stats = await client.getStats({});
    expect(stats.namespaces[0]).toMatchObject({ namespace: "kv", keys: 1n, completeKeys: 1n, ranks: [{ rank: 0, numPages: 16, usedPages: 1, freePages: 15 }] });
    await client.clear({});
    expect((await client.getStats({})).namespaces[0]!.keys).toBe(0n);
  });

  it("answers every error with its code and an ErrorInfo detail", async () => {
    const server = await startTestServer({ maxKeysPerCall: 4, maxKeyBytes: 8 });
    const client = createMetadataClient({ baseUrl: server.url, protocol, httpVersion, retry: { deadlineMs: 0 } });
    const notInit = await expectError(client.batchAllocate({ namespace: "ns", rank: 3, keys: ["a"] }), Code.FailedPrecondition, Reason.RANK_NOT_INITIALIZED);
    expect(notInit).toMatchObject({ namespace: "ns", rank: 3 });
    await expectError(client.getLocations({ rank: 0, keys: ["a"] }), Code.FailedPrecondition, Reason.RANK_NOT_INITIALIZED);
    await client.initializeRank({ rank: 0, numPages: 4, worldSize: 2 });
    await expectError(client.initializeRank({ rank: 0, numPages: 4, worldSize: 3 }), Code.FailedPrecondition, Reason.RANK_CONFIG_MISMATCH);
    await expectError(client.initializeRank({ rank: 1, numPages: 0, worldSize: 2 }), Code.InvalidArgument, Reason.INVALID_ARGUMENT);
    await expectError(client.initializeRank({ rank: 2, numPages: 4, worldSize: 2 }), Code.InvalidArgument, Reason.INVALID_ARGUMENT);
    await expectError(client.batchAllocate({ rank: 0, keys: ["a", "b", "c", "d", "e"] }), Code.InvalidArgument, Reason.LIMIT_EXCEEDED);
    await expectError(client.batchAllocate({ rank: 0, keys: ["123456789"] }), Code.InvalidArgument, Reason.LIMIT_EXCEEDED);
    await expectError(client.batchAllocate({ rank: 0, keys: ["a"], prefixKeys: ["", ""] }), Code.InvalidArgument, Reason.INVALID_ARGUMENT);
    const { pages } = await client.batchAllocate({ rank: 0, keys: ["a", "b"] });
    const outOfRange = await expectError(client.confirmWrite({ rank: 0, keys: ["a"], pages: [4] }), Code.InvalidArgument, Reason.PAGE_OUT_OF_RANGE);
    expect(outOfRange).toMatchObject({ page: 4, field: "pages" });
    await expectError(client.confirmWrite({ rank: 0, keys: ["a"], pages: [] }), Code.InvalidArgument, Reason.INVALID_ARGUMENT);
    const notFound = await expectError(
      client.confirmWrite({ rank: 0, keys: ["a"], pages: [pages[1]!] }),
      Code.FailedPrecondition,
      Reason.RESERVATION_NOT_FOUND,
    );
    expect(notFound).toMatchObject({ key: "a", page: pages[1], rank: 0, namespace: "kv" });
    await client.confirmWrite({ rank: 0, keys: ["a"], pages: [pages[0]!] });
    await expectError(client.confirmWrite({ rank: 0, keys: [], pages: [], pagesToRelease: [pages[0]!] }), Code.FailedPrecondition, Reason.PAGE_IN_USE);
    await server.close();
  });
});

describe("a key that starts with U+FEFF", () => {
  it("is the same key over gRPC (the fast path's codecs) and Connect (connect-node, protobuf-es)", async () => {
    const server = await startTestServer();
    const overGrpc = createMetadataClient({ baseUrl: server.url, protocol: "grpc", retry: { deadlineMs: 0 } });
    const overConnect = createMetadataClient({ baseUrl: server.url, protocol: "connect", httpVersion: "1.1", retry: { deadlineMs: 0 } });
    await overGrpc.initializeRank({ rank: 0, numPages: 4, worldSize: 1 });
    for (const [client, key] of [
      [overGrpc, "\uFEFFa"],
      [overConnect, "\uFEFFb"],
    ] as const) {
      const { pages } = await client.batchAllocate({ rank: 0, keys: [key] });
      await client.confirmWrite({ rank: 0, keys: [key], pages });
    }
    for (const client of [overGrpc, overConnect]) {
      expect((await client.batchExists({ keys: ["\uFEFFa", "\uFEFFb", "a", "b"] })).exists).toEqual([true, true, false, false]);
    }
  });
});

describe("a malformed gRPC request", () => {
  it("is INVALID_ARGUMENT with an ErrorInfo, not INTERNAL", async () => {
    const { connect } = await import("node:http2");
    const server = await startTestServer();
    const session = connect(server.url);
    try {
      const trailers = await new Promise<Record<string, unknown>>((resolve, reject) => {
        const stream = session.request({
          ":method": "POST",
          ":path": `/${MetadataService.typeName}/BatchAllocate`,
          "content-type": "application/grpc",
          te: "trailers",
        });
        stream.on("trailers", resolve);
        stream.on("data", () => undefined);
        stream.on("error", reject);
        // One message of 3 bytes: field 3 (keys) of length 200, truncated.
        stream.end(Buffer.from([0, 0, 0, 0, 3, 0x1a, 0xc8, 0x01]));
      });
      expect(trailers["grpc-status"]).toBe(String(Code.InvalidArgument));
      expect(trailers["grpc-status-details-bin"]).toBeDefined();
    } finally {
      session.close();
    }
  });
});

describe("gRPC with compression", () => {
  it("is served (by connect-node, not the fast path) with the same answers", async () => {
    const { compressionGzip, createGrpcTransport } = await import("@connectrpc/connect-node");
    const { createClient } = await import("@connectrpc/connect");
    const server = await startTestServer();
    const transport = createGrpcTransport({ baseUrl: server.url, sendCompression: compressionGzip, compressMinBytes: 1 });
    const client = createClient(MetadataService, transport);
    await client.initializeRank({ rank: 0, numPages: 4 });
    expect((await client.batchAllocate({ rank: 0, keys: ["a".repeat(100)] })).pages).toEqual([0]);
    await expectError(client.batchAllocate({ rank: 1, keys: ["a"] }), Code.FailedPrecondition, Reason.RANK_NOT_INITIALIZED);
  });
});

describe("a server shutting down", () => {
  it("answers new calls UNAVAILABLE with SHUTTING_DOWN", async () => {
    const server = await startTestServer();
    const client = createMetadataClient({ baseUrl: server.url, protocol: "connect", httpVersion: "1.1", retry: { deadlineMs: 0 } });
    await client.initializeRank({ rank: 0, numPages: 1 });
    const closing = server.close();
    await expectError(client.batchExists({ keys: ["a"] }), Code.Unavailable, Reason.SHUTTING_DOWN).catch(async () => {
      // The listener may already have closed the connection: then the client sees a connection error.
      await expect(client.batchExists({ keys: ["a"] })).rejects.toMatchObject({ code: Code.Unavailable });
    });
    await closing;
  });
});

describe("an independent gRPC implementation (@grpc/grpc-js)", () => {
  function grpcClient(url: string) {
    const target = url.replace("http://", "");
    const client = new grpc.Client(target, grpc.credentials.createInsecure());
    function unary<I, O>(method: string, input: I, encode: (i: I) => Uint8Array, decode: (b: Uint8Array) => O) {
      return new Promise<O>((resolve, reject) => {
        client.makeUnaryRequest(
          `/${MetadataService.typeName}/${method}`,
          (i: I) => Buffer.from(encode(i)),
          (b: Buffer) => decode(b),
          input,
          (err, value) => (err ? reject(err) : resolve(value!)),
        );
      });
    }
    return { client, unary };
  }

  it("runs a cycle and reads FAILED_PRECONDITION with its ErrorInfo from the grpc-status-details-bin trailer", async () => {
    const server = await startTestServer();
    const { client, unary } = grpcClient(server.url);
    try {
      const init = await unary(
        "InitializeRank",
        create(InitializeRankRequestSchema, { rank: 0, numPages: 8, worldSize: 1 }),
        (m) => toBinary(InitializeRankRequestSchema, m),
        (b) => fromBinary(InitializeRankResponseSchema, b),
      );
      expect(init.created).toBe(true);
      const encodeAlloc = (m: ReturnType<typeof create<typeof BatchAllocateRequestSchema>>) => toBinary(BatchAllocateRequestSchema, m);
      const alloc = await unary("BatchAllocate", create(BatchAllocateRequestSchema, { rank: 0, keys: ["x"] }), encodeAlloc, (b) =>
        fromBinary(BatchAllocateResponseSchema, b),
      );
      expect(alloc.pages).toEqual([0]);
      const confirm = await unary(
        "ConfirmWrite",
        create(ConfirmWriteRequestSchema, { rank: 0, keys: ["x"], pages: alloc.pages }),
        (m) => toBinary(ConfirmWriteRequestSchema, m),
        (b) => fromBinary(ConfirmWriteResponseSchema, b),
      );
      expect(confirm.confirmed).toBe(1);

      const error = await unary("BatchAllocate", create(BatchAllocateRequestSchema, { rank: 9, keys: ["x"] }), encodeAlloc, (b) =>
        fromBinary(BatchAllocateResponseSchema, b),
      ).then(
        () => undefined,
        (e: grpc.ServiceError) => e,
      );
      expect(error?.code).toBe(grpc.status.FAILED_PRECONDITION);
      const info = errorInfoOf(error!);
      expect(info).toMatchObject({ reason: Reason.RANK_NOT_INITIALIZED, rank: 9, namespace: "kv" });
      expect(error!.metadata.get("hf3fs-server-id")).toEqual([server.store.serverId]);
    } finally {
      client.close();
    }
  });
});

describe("every error through @grpc/grpc-js", () => {
  it("carries its numeric code and a decodable ErrorInfo", async () => {
    const store = new FailingStore(await LmdbStore.open(tempDir()));
    const server = await startTestServer({ maxKeysPerCall: 4, maxKeyBytes: 8 }, store);
    const target = server.url.replace("http://", "");
    const client = new grpc.Client(target, grpc.credentials.createInsecure());
    const call = <S extends DescMessage>(method: string, schema: S, init: MessageInitShape<S>) =>
      new Promise<grpc.ServiceError | undefined>((resolve) => {
        client.makeUnaryRequest(
          `/${MetadataService.typeName}/${method}`,
          (m: MessageShape<S>) => Buffer.from(toBinary(schema, m)),
          (b: Buffer) => b,
          create(schema, init),
          (err) => resolve(err ?? undefined),
        );
      });
    try {
      expect(await call("InitializeRank", InitializeRankRequestSchema, { rank: 0, numPages: 4, worldSize: 1 })).toBeUndefined();
      const reserved = await new Promise<number[]>((resolve, reject) =>
        client.makeUnaryRequest(
          `/${MetadataService.typeName}/BatchAllocate`,
          (m: MessageShape<typeof BatchAllocateRequestSchema>) => Buffer.from(toBinary(BatchAllocateRequestSchema, m)),
          (b: Buffer) => fromBinary(BatchAllocateResponseSchema, b).pages,
          create(BatchAllocateRequestSchema, { rank: 0, keys: ["a", "b"] }),
          (err, pages) => (err ? reject(err) : resolve(pages!)),
        ),
      );
      expect(await call("ConfirmWrite", ConfirmWriteRequestSchema, { rank: 0, keys: ["a"], pages: [reserved[0]!] })).toBeUndefined();
      const cases: [string, grpc.status, Reason, Promise<grpc.ServiceError | undefined>][] = [
        ["num_pages 0", grpc.status.INVALID_ARGUMENT, Reason.INVALID_ARGUMENT, call("InitializeRank", InitializeRankRequestSchema, { rank: 2, numPages: 0 })],
        [
          "too many keys",
          grpc.status.INVALID_ARGUMENT,
          Reason.LIMIT_EXCEEDED,
          call("BatchAllocate", BatchAllocateRequestSchema, { rank: 0, keys: ["1", "2", "3", "4", "5"] }),
        ],
        [
          "page out of range",
          grpc.status.INVALID_ARGUMENT,
          Reason.PAGE_OUT_OF_RANGE,
          call("ConfirmWrite", ConfirmWriteRequestSchema, { rank: 0, keys: ["b"], pages: [9] }),
        ],
        [
          "rank not initialized",
          grpc.status.FAILED_PRECONDITION,
          Reason.RANK_NOT_INITIALIZED,
          call("BatchAllocate", BatchAllocateRequestSchema, { rank: 5, keys: ["a"] }),
        ],
        [
          "config mismatch",
          grpc.status.FAILED_PRECONDITION,
          Reason.RANK_CONFIG_MISMATCH,
          call("InitializeRank", InitializeRankRequestSchema, { rank: 0, numPages: 5, worldSize: 2 }),
        ],
        [
          "no reservation",
          grpc.status.FAILED_PRECONDITION,
          Reason.RESERVATION_NOT_FOUND,
          call("ConfirmWrite", ConfirmWriteRequestSchema, { rank: 0, keys: ["c"], pages: [3] }),
        ],
        [
          "page in use",
          grpc.status.FAILED_PRECONDITION,
          Reason.PAGE_IN_USE,
          call("ConfirmWrite", ConfirmWriteRequestSchema, { rank: 0, pagesToRelease: [reserved[0]!] }),
        ],
      ];
      for (const [what, code, reason, pending] of cases) {
        const error = await pending;
        expect({ what, code: error?.code, reason: error && errorInfoOf(error).reason }).toEqual({ what, code, reason });
      }
      store.breakNow();
      const unavailable = await call("BatchAllocate", BatchAllocateRequestSchema, { rank: 0, keys: ["z"] });
      expect(unavailable?.code).toBe(grpc.status.UNAVAILABLE);
      expect(errorInfoOf(unavailable!).reason).toBe(Reason.STORE_UNAVAILABLE);
    } finally {
      client.close();
      await store.close();
    }
  });
});

/** errorInfoOf decodes google.rpc.Status from the trailer and the ErrorInfo in its details. */
function errorInfoOf(error: grpc.ServiceError) {
  const [bin] = error.metadata.get("grpc-status-details-bin") as Buffer[];
  expect(bin).toBeDefined();
  // google.rpc.Status: 1 code, 2 message, 3 repeated Any {1 type_url, 2 value}.
  const fields = readFields(bin!);
  const any = readFields(fields.filter(([n]) => n === 3).map(([, v]) => v as Uint8Array)[0]!);
  const typeUrl = Buffer.from(any.find(([n]) => n === 1)![1] as Uint8Array).toString();
  expect(typeUrl).toBe("type.googleapis.com/hf3fs.metadata.v1.ErrorInfo");
  return fromBinary(ErrorInfoSchema, any.find(([n]) => n === 2)![1] as Uint8Array);
}

function readFields(bytes: Uint8Array): [number, number | Uint8Array][] {
  const out: [number, number | Uint8Array][] = [];
  let i = 0;
  const varint = () => {
    let result = 0;
    let shift = 0;
    for (;;) {
      const b = bytes[i++]!;
      result += (b & 0x7f) * 2 ** shift;
      if (b < 0x80) return result;
      shift += 7;
    }
  };
  while (i < bytes.length) {
    const tag = varint();
    if ((tag & 7) === 0) out.push([tag >> 3, varint()]);
    else {
      const len = varint();
      out.push([tag >> 3, bytes.subarray(i, i + len)]);
      i += len;
    }
  }
  return out;
}

describe("GetStats of every namespace", () => {
  it("answers a page at a time, by name, and the pages together hold every namespace once", async () => {
    const server = await startTestServer();
    const names = Array.from({ length: 40 }, (_, i) => `ns-${String(i).padStart(2, "0")}`);
    for (const name of [...names].reverse()) server.state.initializeRank(name, 0, 4, 1);
    const client = createMetadataClient({ baseUrl: server.url, retry: { deadlineMs: 0 } });
    const first = await client.getStats({ allNamespaces: true });
    expect(first.namespaces.map((n) => n.namespace)).toEqual(names.slice(0, 16)); // 16 by default
    const seen: string[] = [];
    let pages = 0;
    for (let pageToken = "", more = true; more; pages++) {
      const page = await client.getStats({ allNamespaces: true, pageSize: 15, pageToken });
      seen.push(...page.namespaces.map((n) => n.namespace));
      pageToken = page.nextPageToken;
      more = pageToken !== "";
    }
    expect([seen, pages]).toEqual([names, 3]);
    const huge = await client.getStats({ allNamespaces: true, pageSize: 1_000_000 });
    expect([huge.namespaces.length, huge.nextPageToken]).toEqual([40, ""]);
  });
});
