import { writeFileSync } from "node:fs";
import * as http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { create, toJson } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import { describe, expect, it } from "vitest";
import { type BatchCall, ErrorInfoSchema, MetadataService, Reason } from "../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { AccessPolicy } from "../../src/service/access-policy.js";
import { LmdbStore } from "../../src/store/lmdb-store.js";
import { FailingStore } from "../support/failing-store.js";
import { tempDir } from "../support/temp-dir.js";
import { startTestRelay } from "../support/test-relay.js";
import { startTestServer } from "../support/test-server.js";

/** bearer is an interceptor that sends `token`. */
const bearer =
  (token: string): Interceptor =>
  (next) =>
  (req) => {
    req.header.set("authorization", `Bearer ${token}`);
    return next(req);
  };

type Client = ReturnType<typeof createClient<typeof MetadataService>>;

const grpc = (url: string, token?: string) =>
  createClient(
    MetadataService,
    createGrpcTransport({
      baseUrl: url,
      interceptors: token === undefined ? [] : [bearer(token)],
    }),
  );

/** CALLS are a Batch's calls, meant to meet a response of each method and errors of each kind a call alone can fail with. */
const CALLS: BatchCall["call"][] = [
  { case: "batchAllocate", value: create(MetadataService.method.batchAllocate.input, { rank: 0, keys: ["a", "b"], prefixKeys: ["", "a"] }) },
  { case: "batchAllocate", value: create(MetadataService.method.batchAllocate.input, { rank: 9, keys: ["a"] }) }, // rank not initialized
  { case: "batchAllocate", value: create(MetadataService.method.batchAllocate.input, { rank: 0, keys: ["x"], prefixKeys: ["p", "q"] }) }, // lengths
  { case: "confirmWrite", value: create(MetadataService.method.confirmWrite.input, { rank: 0, keys: ["zz"], pages: [3] }) }, // no reservation
  { case: "batchExists", value: create(MetadataService.method.batchExists.input, { keys: ["a", "b", "c"] }) },
  { case: "getLocations", value: create(MetadataService.method.getLocations.input, { rank: 0, keys: ["a", "none"], includeIncomplete: true }) },
];

/** outcome is what a caller sees of one call: its response as JSON, or its code, message and ErrorInfo. */
function outcome(result: { case: string | undefined; value?: unknown }): unknown {
  if (result.case === "error") {
    const { code, message, info } = result.value as { code: number; message: string; info?: object };
    return { code, message, info: info && toJson(ErrorInfoSchema, create(ErrorInfoSchema, info)) };
  }
  const method = MetadataService.method[result.case as keyof typeof MetadataService.method];
  return toJson(method.output, create(method.output, result.value as never));
}

/** alone is the outcome of each call made alone, in order, on `client`. */
async function alone(client: Client, calls: BatchCall["call"][]): Promise<unknown[]> {
  const outcomes = [];
  for (const { case: method, value } of calls) {
    outcomes.push(
      await (client[method!] as (r: unknown) => Promise<unknown>)(value).then(
        (response) => outcome({ case: method, value: response }),
        (e: unknown) => {
          const error = ConnectError.from(e);
          return outcome({ case: "error", value: { code: error.code, message: error.rawMessage, info: error.findDetails(ErrorInfoSchema)[0] } });
        },
      ),
    );
  }
  return outcomes;
}

/** olderMember passes every call on to `upstream` but Batch, which it answers as a server without the method does: HTTP 404, no gRPC status. */
async function olderMember(upstream: string) {
  const session = http2.connect(upstream);
  let refused = 0;
  const server = http2.createServer((req, res) => {
    if (req.url.endsWith("/Batch")) {
      refused++;
      res.writeHead(404);
      res.end();
      return;
    }
    const headers = Object.fromEntries(Object.entries(req.headers).filter(([name]) => !name.startsWith(":") || name === ":method" || name === ":path"));
    const call = session.request(headers);
    req.pipe(call);
    call.on("response", (head) => res.writeHead(Number(head[":status"]), Object.fromEntries(Object.entries(head).filter(([name]) => !name.startsWith(":")))));
    call.on("trailers", (trailers) => res.addTrailers(trailers));
    call.pipe(res);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    refusedBatches: () => refused,
    close: () => {
      server.close();
      session.close();
    },
  };
}

describe("Batch", () => {
  it("answers each call as the call alone would have been answered, in the calls' order", async () => {
    const [one, other] = [await startTestServer({}), await startTestServer({})];
    const [direct, batched] = [grpc(one.url), grpc(other.url)];
    for (const client of [direct, batched]) await client.initializeRank({ rank: 0, numPages: 8 });
    const expected = await alone(direct, CALLS);
    const { results } = await batched.batch({ calls: CALLS.map((call) => ({ call })) });
    expect(results.map((r) => outcome(r.result))).toEqual(expected);
    // Every kind of answer was met: responses, and the errors of a rank not initialized, of lengths, and of a missing reservation.
    const reasons = results.filter((r) => r.result.case === "error").map((r) => (r.result.value as { info: { reason: Reason } }).info.reason);
    expect(reasons).toEqual([Reason.RANK_NOT_INITIALIZED, Reason.INVALID_ARGUMENT, Reason.RESERVATION_NOT_FOUND]);
    // The changes stand as if the calls had come alone: a and b reserved on rank 0, and located there.
    expect(await alone(batched, [CALLS[5]!])).toEqual(await alone(direct, [CALLS[5]!]));
  });

  it("is refused as a whole, as any call, when it is malformed, past the limits, or without the token its calls need", async () => {
    const dir = tempDir();
    writeFileSync(join(dir, "tokens"), "worker-token\n");
    const server = await startTestServer({ maxKeysPerCall: 8 }, undefined, 0, { access: new AccessPolicy({ workerTokenFile: join(dir, "tokens") }) });
    const client = grpc(server.url, "worker-token");
    await client.initializeRank({ rank: 0, numPages: 8 });
    const refusal = (call: Promise<unknown>) =>
      call.then(
        () => undefined,
        (e: unknown) => [ConnectError.from(e).code, ConnectError.from(e).findDetails(ErrorInfoSchema)[0]?.reason],
      );
    const exists = (n: number) => ({ call: { case: "batchExists" as const, value: { keys: Array.from({ length: n }, (_, i) => `k${i}`) } } });
    expect(await refusal(client.batch({ calls: [] }))).toEqual([Code.InvalidArgument, Reason.INVALID_ARGUMENT]);
    expect(await refusal(client.batch({ calls: [{}] }))).toEqual([Code.InvalidArgument, Reason.INVALID_ARGUMENT]);
    // At most 1,024 calls, however small (here within the entries: a call of no key counts 2).
    const empty = { call: { case: "batchExists" as const, value: {} } };
    const many = createClient(MetadataService, createGrpcTransport({ baseUrl: (await startTestServer({})).url }));
    expect(await refusal(many.batch({ calls: Array.from({ length: 1_024 }, () => empty) }))).toBeUndefined();
    expect(await refusal(many.batch({ calls: Array.from({ length: 1_025 }, () => empty) }))).toEqual([Code.InvalidArgument, Reason.LIMIT_EXCEEDED]);
    // A Batch carries at most what one call may: 4 * 8 + 64 = 96 entries; a call of 8 keys counts 10 here.
    expect(await refusal(client.batch({ calls: Array.from({ length: 9 }, () => exists(8)) }))).toBeUndefined();
    expect(await refusal(client.batch({ calls: Array.from({ length: 10 }, () => exists(8)) }))).toEqual([Code.InvalidArgument, Reason.LIMIT_EXCEEDED]);
    // Each call is held to the per-call key limit, as alone.
    const { results } = await client.batch({ calls: [exists(9), exists(1)] });
    expect(results.map((r) => (r.result.case === "error" ? r.result.value.info?.reason : r.result.case))).toEqual([Reason.LIMIT_EXCEEDED, "batchExists"]);
    expect(await refusal(grpc(server.url).batch({ calls: [exists(1)] }))).toEqual([Code.Unauthenticated, Reason.UNAUTHENTICATED]);
    // The same over Connect, which connect-node decodes: the same limit of entries.
    const connect = createClient(
      MetadataService,
      createConnectTransport({
        baseUrl: server.url,
        httpVersion: "1.1",
        interceptors: [bearer("worker-token")],
      }),
    );
    expect(await refusal(connect.batch({ calls: Array.from({ length: 10 }, () => exists(8)) }))).toEqual([Code.InvalidArgument, Reason.LIMIT_EXCEEDED]);
    expect(await refusal(connect.batch({ calls: [exists(1)] }))).toBeUndefined();
    // And in Connect's JSON, whose values are counted instead, nested ones included; a malformed one is refused too.
    const json = createClient(
      MetadataService,
      createConnectTransport({ baseUrl: server.url, httpVersion: "1.1", useBinaryFormat: false, interceptors: [bearer("worker-token")] }),
    );
    expect(await refusal(json.batch({ calls: Array.from({ length: 20 }, () => exists(8)) }))).toEqual([Code.InvalidArgument, Reason.LIMIT_EXCEEDED]);
    expect(await refusal(json.batch({ calls: [exists(1)] }))).toBeUndefined();
    const malformed = await fetch(`${server.url}/hf3fs.metadata.v1.MetadataService/Batch`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: "Bearer worker-token" },
      body: '{"calls": [{"batchExists": {"keys": 7}}]}',
    });
    expect([malformed.status, ((await malformed.json()) as { code: string }).code]).toEqual([400, "invalid_argument"]);
  });

  it("answers only once its calls' changes are durable: a store that fails its commit fails the Batch", async () => {
    const store = new FailingStore(await LmdbStore.open(tempDir()));
    const server = await startTestServer({}, store);
    const client = grpc(server.url);
    await client.initializeRank({ rank: 0, numPages: 8 });
    store.breakNow();
    const answer = await client.batch({ calls: [{ call: CALLS[0]! }, { call: CALLS[4]! }] }).then(
      () => undefined,
      (e: unknown) => ConnectError.from(e).findDetails(ErrorInfoSchema)[0]?.reason,
    );
    expect(answer).toBe(Reason.STORE_UNAVAILABLE);
  });

  it("is not needed by a relay in front of a member that does not know it (an older version): every call is answered, alone", async () => {
    const server = await startTestServer({});
    const older = await olderMember(server.url);
    const relay = await startTestRelay(older.url);
    const callers = Array.from({ length: 20 }, () => grpc(relay.url));
    await Promise.all(callers.map((client) => client.initializeRank({ rank: 0, numPages: 256 })));
    const started = Date.now();
    const pages = await Promise.all(callers.map((client, i) => client.batchAllocate({ rank: 0, keys: [`key-${i}`] }).then((r) => r.pages[0])));
    expect(new Set(pages).size).toBe(20);
    expect(older.refusedBatches()).toBeGreaterThan(0);
    // Not held until the hold runs out: the member's 404 says it has no such method (UNIMPLEMENTED), which is not sent again.
    expect(Date.now() - started).toBeLessThan(10_000);
    older.close();
  });

  it("is what a relay sends for calls that come while others are on their way: each caller gets its own answer", async () => {
    const server = await startTestServer({});
    const relay = await startTestRelay(server.url);
    await grpc(relay.url).initializeRank({ rank: 0, numPages: 256 });
    // Twenty callers at once, each on its own connection, as an engine's workers; one of them asks for a rank no one initialized.
    const callers = Array.from({ length: 20 }, () => grpc(relay.url));
    // Their connections open first (InitializeRank always goes alone), so that the calls reach the relay together.
    await Promise.all(callers.map((client) => client.initializeRank({ rank: 0, numPages: 256 })));
    const answers = await Promise.all(
      callers.map((client, i) =>
        (i === 7 ? client.batchAllocate({ rank: 9, keys: ["k"] }) : client.batchAllocate({ rank: 0, keys: [`key-${i}`] })).then(
          (r) => r.pages[0],
          (e: unknown) => ConnectError.from(e).findDetails(ErrorInfoSchema)[0]?.reason,
        ),
      ),
    );
    expect(answers[7]).toBe(Reason.RANK_NOT_INITIALIZED);
    // Every other caller got a page of its own.
    const pages = answers.filter((_, i) => i !== 7);
    expect(new Set(pages).size).toBe(19);
    expect(pages.every((p) => typeof p === "number" && p >= 0 && p < 256)).toBe(true);
    const metrics = await (await fetch(`${server.url}/metrics`)).text();
    const count = (method: string, code: string) =>
      Number(new RegExp(`hf3fs_metadata_calls_total\\{method="${method}",code="${code}"\\} (\\d+)`).exec(metrics)?.[1] ?? 0);
    const batches = count("Batch", "ok");
    expect(batches).toBeGreaterThan(0);
    // Each call is counted by its method and code, alone or in a Batch: the server's dashboards see the engines' calls either way.
    expect([count("BatchAllocate", "ok"), count("BatchAllocate", "failed_precondition")]).toEqual([19, 1]);
    // The relay counts the Batches it sent, and the calls they gathered (at least two each).
    const relayMetrics = await (await fetch(`${relay.url}/metrics`)).text();
    expect(Number(/hf3fs_relay_batch_calls_count (\d+)/.exec(relayMetrics)?.[1])).toBe(batches);
    expect(Number(/hf3fs_relay_batch_calls_sum (\d+)/.exec(relayMetrics)?.[1])).toBeGreaterThanOrEqual(2 * batches);
  });
});
