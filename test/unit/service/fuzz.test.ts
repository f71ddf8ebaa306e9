import * as http2 from "node:http2";
import { create, type DescMessage, toBinary } from "@bufbuild/protobuf";
import fc from "fast-check";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { assertInvariants } from "../../../bench/harness/invariants.js";
import { MetadataService } from "../../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { startTestRelay } from "../../support/test-relay.js";
import { startTestServer, type TestServer } from "../../support/test-server.js";
import { startTestShards } from "../../support/test-shards.js";
import { wrongFields } from "../../support/wrong-fields.js";

// Every answer must be one docs/contract.md documents; never INTERNAL (13), UNKNOWN (2) or 500.
const GRPC_CODES = new Set(["0", "3", "4", "5", "8", "9", "12", "14"]);
const JSON_STATUSES = new Set([200, 204, 400, 404, 405, 408, 409, 413]);
const RUNS = Number(process.env.FUZZ_RUNS ?? 1_000);

/** SERVED are what the fuzz is sent to: one node, a member of 2 shards, which routes each call's parts (startTestShards), and a relay in front of them. */
const SERVED = [
  ["one node", 1, false],
  ["a member of 2 shards", 2, false],
  ["a relay in front of 2 shards", 2, true],
] as const;
const LIMITS = { maxKeysPerCall: 64, maxKeyBytes: 64 };

let servers: TestServer[];
let session: http2.ClientHttp2Session;

/** serve starts what a describe fuzzes (its servers are stopped after each test, so each test starts its own), ranks 0 and 1 defined on each. */
async function serve(shards: number, relayed: boolean): Promise<void> {
  servers = shards === 1 ? [await startTestServer(LIMITS)] : await startTestShards(shards, LIMITS);
  for (const { state } of servers) for (const rank of [0, 1]) state.initializeRank("", rank, 16, 2);
  const relay = relayed ? await startTestRelay(servers.map((s) => s.url).join(";"), { maxKeysPerCall: LIMITS.maxKeysPerCall }) : undefined;
  session = http2.connect((relay ?? servers[0]!).url);
}

afterEach(() => session.destroy());

/** invariantsHold checks every state served. */
function invariantsHold(): void {
  for (const { state } of servers) assertInvariants(state);
}

/** post sends one HTTP/2 request and returns its status and grpc-status (from trailers or headers). */
function post(path: string, headers: http2.OutgoingHttpHeaders, body: Uint8Array): Promise<{ status: number; grpcStatus?: string }> {
  return new Promise((resolve, reject) => {
    const stream = session.request({ ":method": "POST", ":path": path, ...headers });
    let status = 0;
    let grpcStatus: string | undefined;
    stream.on("response", (h) => {
      status = Number(h[":status"]);
      grpcStatus ??= h["grpc-status"] as string | undefined;
    });
    stream.on("trailers", (t) => (grpcStatus = t["grpc-status"] as string | undefined));
    stream.on("error", reject);
    // gRPC-Web carries its status in a trailer frame of the body.
    let text = "";
    stream.on("data", (d: Buffer) => (text += d.toString("latin1")));
    stream.on("close", () => resolve({ status, grpcStatus: grpcStatus ?? /grpc-status: ?(\d+)/.exec(text)?.[1] }));
    // An answer that does not come is a failure of its own, with its counterexample.
    stream.setTimeout(5_000, () => reject(new Error(`no answer in 5 s from ${path}`)));
    stream.end(body);
  });
}

function frame(message: Uint8Array, flag = 0, length = message.length): Buffer {
  const out = Buffer.alloc(5 + message.length);
  out[0] = flag;
  out.writeUInt32BE(length >>> 0, 1);
  out.set(message, 5);
  return out;
}

const methods = MetadataService.methods.filter((m) => m.methodKind === "unary");
const valid = (input: DescMessage) => toBinary(input, create(input, { namespace: "", rank: 0, keys: ["a", "b"], pages: [1, 2] } as never));

/** mutate flips, inserts and deletes bytes of a valid message. */
const mutated = (input: DescMessage) =>
  fc.tuple(fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 }), fc.constantFrom("flip", "insert", "delete")), { maxLength: 6 })).map(([edits]) => {
    const bytes = [...valid(input)];
    for (const [at, value, kind] of edits) {
      const i = bytes.length === 0 ? 0 : at % bytes.length;
      if (kind === "flip") bytes[i] = value;
      else if (kind === "insert") bytes.splice(i, 0, value);
      else bytes.splice(i, 1);
    }
    return Uint8Array.from(bytes);
  });

const message = (input: DescMessage) => fc.oneof(fc.uint8Array({ maxLength: 120 }), mutated(input));

describe.each(SERVED)("fuzzing every framing at %s (seed printed on failure)", (_, shards, relayed) => {
  beforeEach(() => serve(shards, relayed));

  it.each(methods.map((m) => [m.name, m] as const))("gRPC messages of %s: documented codes only, invariants hold", async (_, method) => {
    await fc.assert(
      fc.asyncProperty(message(method.input), fc.constantFrom("grpc", "connect", "grpc-web"), async (bytes, framing) => {
        const path = `/${MetadataService.typeName}/${method.name}`;
        const answer =
          framing === "grpc"
            ? await post(path, { "content-type": "application/grpc", te: "trailers" }, frame(bytes))
            : framing === "grpc-web"
              ? await post(path, { "content-type": "application/grpc-web+proto" }, frame(bytes))
              : await post(path, { "content-type": "application/proto" }, bytes);
        if (framing === "connect") expect(JSON_STATUSES).toContain(answer.status);
        else expect(GRPC_CODES).toContain(answer.grpcStatus);
        invariantsHold();
      }),
      { numRuns: RUNS / 4 },
    );
  });

  // Messages well formed on the wire and wrong in their fields (wrongFields).
  const fields = wrongFields(["a", "b", "c", "d", "e", "f", "g", "h"]);
  it.each(methods.map((m) => [m.name, m] as const))("gRPC messages of %s wrong in their fields: documented codes only, invariants hold", async (_, method) => {
    await fc.assert(
      fc.asyncProperty(fields, async (init) => {
        const bytes = toBinary(method.input, create(method.input, init as never));
        const answer = await post(`/${MetadataService.typeName}/${method.name}`, { "content-type": "application/grpc", te: "trailers" }, frame(bytes));
        expect(GRPC_CODES).toContain(answer.grpcStatus);
        invariantsHold();
      }),
      { numRuns: RUNS / 8 },
    );
  });

  it("gRPC frames: bad lengths, compressed flag without encoding, several messages, no message", async () => {
    const bytes = valid(MetadataService.method.batchExists.input);
    const frames = fc.oneof(
      fc.constant(Buffer.alloc(0)),
      fc.uint8Array({ maxLength: 4 }).map((b) => Buffer.from(b)),
      fc.integer({ min: 0, max: 2 ** 32 - 1 }).map((length) => frame(bytes, 0, length)),
      fc.constant(frame(bytes, 1)),
      fc.integer({ min: 2, max: 255 }).map((flag) => frame(bytes, flag)),
      fc.constant(Buffer.concat([frame(bytes), frame(bytes)])),
    );
    await fc.assert(
      fc.asyncProperty(frames, async (body) => {
        const answer = await post(`/${MetadataService.typeName}/BatchExists`, { "content-type": "application/grpc", te: "trailers" }, body);
        expect(GRPC_CODES).toContain(answer.grpcStatus);
        invariantsHold();
      }),
      { numRuns: RUNS / 4 },
    );
  });

  const JSON_ROUTES = [
    "/rank/0/initialize",
    "/keys/batch_allocate",
    "/keys/confirm_write",
    "/keys/batch_exists",
    "/keys/get_locations",
    "/clear",
    "/0/initialize",
    "/0/exists",
    "/0/reserve_and_allocate_page_indices",
    "/0/confirm_write",
    "/0/delete_keys",
    "/0/clear",
    "/0/get_page_indices",
  ];
  // Keys over the limit (64 bytes here) in any field; a 1 MiB key (over the body limit too) as a body of its own.
  const key = fc.oneof(fc.string({ maxLength: 8 }), fc.string({ unit: "binary", maxLength: 8 }), fc.constant(""), fc.constant("k".repeat(1_024)));
  const scalar = fc.oneof(fc.integer(), fc.double(), fc.constant(2 ** 64), fc.constant(-1), fc.boolean(), fc.constant(null), key);
  const field = fc.oneof(scalar, fc.array(scalar, { maxLength: 4 }), fc.array(fc.tuple(key, scalar), { maxLength: 4 }), fc.jsonValue({ maxDepth: 3 }));
  const body = fc.oneof(
    fc
      .record(
        { rank: scalar, keys: field, namespace: scalar, num_pages: scalar, confirmations: field, written_keys_to_confirm: field, pages_to_release: field },
        { requiredKeys: [] },
      )
      .map((o) => JSON.stringify(o)),
    fc.jsonValue().map((v) => JSON.stringify(v)),
    fc.constant(JSON.stringify({ rank: 0, keys: ["k".repeat(1 << 20)] })),
    fc.constantFrom("NaN", "{", "", "[".repeat(100_000) + "]".repeat(100_000), '{"keys": ["\\ud800"]}', "\u0000"),
  );

  it("JSON routes: random bodies get documented statuses only, invariants hold", async () => {
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...JSON_ROUTES), body, async (route, text) => {
        const answer = await post(route, { "content-type": "application/json" }, Buffer.from(text));
        expect(JSON_STATUSES).toContain(answer.status);
        invariantsHold();
      }),
      { numRuns: RUNS / 2 },
    );
  }, 120_000);
});
