import { randomBytes } from "node:crypto";
import * as http2 from "node:http2";
import { create, toBinary } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, type Transport } from "@connectrpc/connect";
import { codeToString } from "@connectrpc/connect/protocol-connect";
import { compressionGzip, createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { describe, expect, it } from "vitest";
import { Health, HealthCheckResponse_ServingStatus as ServingStatus } from "../../../gen/grpc/health/v1/health_pb.js";
import {
  AllocationStatus,
  ErrorInfoSchema,
  GetLocationsRequestSchema,
  MetadataService,
  Reason,
  ReasonSchema,
} from "../../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { MetadataError } from "../../../src/core/errors.js";
import { envelope } from "../../../src/protocol/envelope.js";
import { startTestServer, type TestServer } from "../../support/test-server.js";

/** Answer is what a framing answered, in the terms every framing shares. */
interface Answer {
  code: string;
  reason: string;
  /** status is the HTTP status of the JSON routes; gRPC framings always answer 200 and carry the code in the trailers. */
  status?: number;
}

/** GetLocationsCall is the one call every framing sends: the locations of `keys` on `rank`. */
type GetLocationsCall = (url: string, rank: number, keys: string[]) => Promise<Answer>;

const reasonName = (reason: Reason) => ReasonSchema.values.find((v) => v.number === reason)!.name;

function viaClient(transport: (url: string) => Transport): GetLocationsCall {
  return async (url, rank, keys) => {
    const error = await createClient(MetadataService, transport(url))
      .getLocations({ rank, keys })
      .then(
        () => undefined,
        (e: unknown) => ConnectError.from(e),
      );
    if (error === undefined) return { code: "ok", reason: "" };
    expect(error.metadata.get("hf3fs-server-id")).toBeTruthy();
    const reason = error.findDetails(ErrorInfoSchema)[0]?.reason ?? Reason.UNSPECIFIED;
    return { code: codeToString(error.code), reason: reasonName(reason) };
  };
}

function viaJson(path: (rank: number) => string, body: (rank: number, keys: string[]) => object): GetLocationsCall {
  return async (url, rank, keys) => {
    const res = await fetch(url + path(rank), { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body(rank, keys)) });
    if (res.status < 300) return { code: "ok", reason: "", status: res.status };
    const error = (await res.json()) as { code: string; reason: string };
    return { code: error.code, reason: error.reason, status: res.status };
  };
}

const FRAMINGS: [string, GetLocationsCall][] = [
  ["gRPC (fast path)", viaClient((baseUrl) => createGrpcTransport({ baseUrl }))],
  ["gRPC, compressed (connect-node)", viaClient((baseUrl) => createGrpcTransport({ baseUrl, sendCompression: compressionGzip, compressMinBytes: 0 }))],
  ["Connect", viaClient((baseUrl) => createConnectTransport({ baseUrl, httpVersion: "1.1" }))],
  ["gRPC-Web", viaClient((baseUrl) => createGrpcWebTransport({ baseUrl, httpVersion: "1.1" }))],
  [
    "vLLM JSON",
    viaJson(
      () => "/keys/get_locations",
      (rank, keys) => ({ rank, keys }),
    ),
  ],
  [
    "SGLang JSON",
    viaJson(
      (rank) => `/${rank}/get_page_indices`,
      (_rank, keys) => ({ keys }),
    ),
  ],
];

/** A refusal: how to bring it about, the call that meets it, and what every framing must answer. */
interface Refusal {
  name: string;
  arrange(server: TestServer): void;
  rank: number;
  keys: string[];
  code: Code;
  reason: Reason;
  status: number;
}

const REFUSALS: Refusal[] = [
  {
    name: "the server is shutting down",
    arrange: (s) => s.lifecycle.refuse(new MetadataError(Reason.SHUTTING_DOWN, "shutting down")),
    rank: 0,
    keys: ["k"],
    code: Code.Unavailable,
    reason: Reason.SHUTTING_DOWN,
    status: 503,
  },
  {
    name: "the store failed",
    arrange: (s) => s.lifecycle.refuse(new MetadataError(Reason.STORE_UNAVAILABLE, "store failed")),
    rank: 0,
    keys: ["k"],
    code: Code.Unavailable,
    reason: Reason.STORE_UNAVAILABLE,
    status: 503,
  },
  {
    name: "the body is over the limit",
    arrange: () => undefined,
    rank: 0,
    // 2 MB that gzip cannot shrink (the test server takes 1 MiB): the compressed framing meets the same limit.
    keys: Array.from({ length: 2_000 }, () => randomBytes(500).toString("hex")),
    code: Code.ResourceExhausted,
    reason: Reason.LIMIT_EXCEEDED,
    status: 413,
  },
  {
    name: "the rank is not initialized",
    arrange: () => undefined,
    rank: 7,
    keys: ["k"],
    code: Code.FailedPrecondition,
    reason: Reason.RANK_NOT_INITIALIZED,
    status: 404,
  },
];

describe("when the server is overloaded", () => {
  it.each(FRAMINGS)(
    "%s answers UNAVAILABLE REASON_OVERLOADED (503), health says NOT_SERVING, and calls go through again once the lag is back",
    async (_, call) => {
      let lagMs = 1_000;
      const server = await startTestServer({}, undefined, 0, { overloadLagMs: 100, sampleLag: () => lagMs });
      server.state.initializeRank("", 0, 8, 1);
      const answer = await call(server.url, 0, ["k"]);
      expect([answer.code, answer.reason]).toEqual(["unavailable", "REASON_OVERLOADED"]);
      if (answer.status !== undefined) expect(answer.status).toBe(503);
      const health = createClient(Health, createGrpcTransport({ baseUrl: server.url }));
      expect((await health.check({})).status).toBe(ServingStatus.NOT_SERVING);
      expect(await (await fetch(`${server.url}/metrics`)).text()).toContain("hf3fs_metadata_shed_calls_total 1");
      lagMs = 60; // above half the threshold: still overloaded (hysteresis)
      expect((await call(server.url, 0, ["k"])).reason).toBe("REASON_OVERLOADED");
      lagMs = 10;
      expect((await call(server.url, 0, ["k"])).code).toBe("ok");
      expect((await health.check({})).status).toBe(ServingStatus.SERVING);
    },
  );
});

describe("every framing answers each refusal of the edge alike", () => {
  describe.each(REFUSALS)("when $name", (refusal) => {
    it.each(FRAMINGS)("%s", async (_, call) => {
      const server = await startTestServer();
      server.state.initializeRank("", 0, 8, 1);
      refusal.arrange(server);
      const answer = await call(server.url, refusal.rank, refusal.keys);
      expect(answer.code).toBe(codeToString(refusal.code));
      expect(answer.reason).toBe(reasonName(refusal.reason));
      if (answer.status !== undefined) expect(answer.status).toBe(refusal.status);
    });
  });

  it("and every framing serves the call when nothing refuses it", async () => {
    const server = await startTestServer();
    server.state.initializeRank("", 0, 8, 1);
    for (const [, call] of FRAMINGS) expect((await call(server.url, 0, ["k"])).code).toBe("ok");
  });
});

describe("while the server loads its state (it listens first)", () => {
  /** startLoadingServer is a server that listens before its state is loaded: calls wait at the edge until started() or refuse(). */
  const startLoadingServer = (startupHoldMs = 60_000) => startTestServer({}, undefined, 0, { starting: true, startupHoldMs });

  it.each(FRAMINGS)("%s waits, and is served with the loaded state once it is loaded", async (_, call) => {
    const server = await startLoadingServer();
    let answered = false;
    const held = call(server.url, 0, ["k"]).finally(() => (answered = true));
    const health = createClient(Health, createGrpcTransport({ baseUrl: server.url }));
    expect((await health.check({})).status).toBe(ServingStatus.NOT_SERVING);
    // The health call went and came back, and the held call is still unanswered.
    expect(answered).toBe(false);
    server.state.initializeRank("", 0, 8, 1); // what loading the store restores
    server.lifecycle.started();
    expect((await held).code).toBe("ok");
    expect((await health.check({})).status).toBe(ServingStatus.SERVING);
  });

  it.each(FRAMINGS)("%s gets UNAVAILABLE REASON_STARTING (503) when loading outlasts --startup-hold", async (_, call) => {
    const server = await startLoadingServer(50);
    const answer = await call(server.url, 0, ["k"]);
    expect([answer.code, answer.reason]).toEqual(["unavailable", "REASON_STARTING"]);
    if (answer.status !== undefined) expect(answer.status).toBe(503);
  });

  it.each(FRAMINGS)("%s gets UNAVAILABLE REASON_STORE_UNAVAILABLE (503) when loading fails", async (_, call) => {
    const server = await startLoadingServer();
    const held = call(server.url, 0, ["k"]);
    await createClient(Health, createGrpcTransport({ baseUrl: server.url })).check({});
    server.lifecycle.refuse(new MetadataError(Reason.STORE_UNAVAILABLE, "the server could not load its store"));
    const answer = await held;
    expect([answer.code, answer.reason]).toEqual(["unavailable", "REASON_STORE_UNAVAILABLE"]);
    if (answer.status !== undefined) expect(answer.status).toBe(503);
  });

  it("a call whose body ends after loading failed is refused, not run on the state never loaded", async () => {
    const server = await startLoadingServer();
    const session = http2.connect(server.url);
    const stream = session.request({
      ":method": "POST",
      ":path": "/hf3fs.metadata.v1.MetadataService/GetLocations",
      "content-type": "application/grpc",
    });
    const frame = envelope(toBinary(GetLocationsRequestSchema, create(GetLocationsRequestSchema, { rank: 0, keys: ["k"] })));
    stream.write(frame.subarray(0, 3)); // the edge admits the call while the state loads, and reads its body
    // A health check on the same connection comes back after the call's headers and first bytes reached the server.
    await createClient(Health, createGrpcTransport({ baseUrl: server.url })).check({});
    server.lifecycle.refuse(new MetadataError(Reason.STORE_UNAVAILABLE, "the server could not load its store"));
    const trailers = new Promise<http2.IncomingHttpHeaders>((resolve) => stream.once("trailers", resolve));
    stream.end(frame.subarray(3));
    stream.resume();
    expect((await trailers)["grpc-status"]).toBe(String(Code.Unavailable));
    session.close();
  });

  it("held calls run in the order they came, once the state is loaded", async () => {
    const server = await startLoadingServer();
    const client = createClient(MetadataService, createGrpcTransport({ baseUrl: server.url }));
    // Five single-key allocations on a rank of three pages: whichever run first get the pages.
    const held: Promise<AllocationStatus>[] = [];
    for (let i = 0; i < 5; i++) {
      held.push(client.batchAllocate({ rank: 0, keys: [`k${i}`] }).then((res) => res.statuses[0]!));
      // Each call reaches the server before the next is sent (a health call behind it on the same connection comes back).
      await createClient(Health, createGrpcTransport({ baseUrl: server.url })).check({});
    }
    server.state.initializeRank("", 0, 3, 1);
    server.lifecycle.started();
    expect(await Promise.all(held)).toEqual([
      AllocationStatus.NEW,
      AllocationStatus.NEW,
      AllocationStatus.NEW,
      AllocationStatus.NO_SPACE,
      AllocationStatus.NO_SPACE,
    ]);
  });

  it("a call whose own deadline passes while it waits gets DEADLINE_EXCEEDED and changes nothing", async () => {
    const server = await startLoadingServer();
    const client = createClient(MetadataService, createGrpcTransport({ baseUrl: server.url }));
    const error = await client.batchAllocate({ rank: 0, keys: ["late"] }, { timeoutMs: 100 }).then(
      () => undefined,
      (e: unknown) => ConnectError.from(e),
    );
    expect(error?.code).toBe(Code.DeadlineExceeded);
    server.state.initializeRank("", 0, 3, 1);
    server.lifecycle.started();
    expect((await client.batchExists({ keys: ["late"] })).exists).toEqual([false]);
  });
});
