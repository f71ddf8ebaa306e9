import * as http2 from "node:http2";
import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import { describe, expect, it } from "vitest";
import { startTestRelay } from "../../support/test-relay.js";
import { startTestServer } from "../../support/test-server.js";

// With 4 keys per call, a request may carry 4 × 4 + 64 = 80 entries; these carry 200, all of them ignorable
// (unknown fields, unknown JSON members), so only the entry limit refuses them, before anything is decoded.
const ENTRIES = 200;

/** junkMessage is a GetLocations request of rank 0 followed by ENTRIES unknown fields. */
function junkMessage(): Uint8Array {
  const writer = new BinaryWriter();
  for (let i = 0; i < ENTRIES; i++) writer.tag(15, WireType.Varint).uint32(i);
  return writer.finish();
}

function enveloped(message: Uint8Array): Buffer {
  const frame = Buffer.alloc(5 + message.length);
  frame.writeUInt32BE(message.length, 1);
  frame.set(message, 5);
  return frame;
}

const junkJson = (fields: object) => JSON.stringify({ ...fields, junk: Array.from({ length: ENTRIES }, () => ({})) });
const PATH = "/hf3fs.metadata.v1.MetadataService/GetLocations";

async function grpcFastPath(url: string): Promise<string> {
  const session = http2.connect(url);
  try {
    const stream = session.request({ ":method": "POST", ":path": PATH, "content-type": "application/grpc", te: "trailers" });
    stream.end(enveloped(junkMessage()));
    stream.resume();
    const trailers = await new Promise<http2.IncomingHttpHeaders>((resolve) => stream.once("trailers", resolve));
    return `${trailers["grpc-status"]} ${decodeURIComponent(String(trailers["grpc-message"]))}`;
  } finally {
    session.close();
  }
}

async function post(url: string, contentType: string, body: Uint8Array | string): Promise<string> {
  const res = await fetch(url, { method: "POST", headers: { "content-type": contentType }, body });
  return `${res.status} ${decodeURIComponent(await res.text())}`;
}

const cases: [string, (url: string) => Promise<string>, RegExp][] = [
  ["gRPC (fast path)", grpcFastPath, /^3 .*more than 80 entries/],
  ["gRPC-Web", (url) => post(url + PATH, "application/grpc-web+proto", enveloped(junkMessage())), /^200 [\s\S]*more than 80 entries[\s\S]*grpc-status: 3/],
  ["Connect, binary", (url) => post(url + PATH, "application/proto", junkMessage()), /^400 .*more than 80 entries/],
  ["Connect, JSON", (url) => post(url + PATH, "application/json", junkJson({ rank: 0 })), /^400 .*more than 80 entries/],
  ["vLLM JSON", (url) => post(`${url}/keys/get_locations`, "application/json", junkJson({ rank: 0, keys: ["k"] })), /^400 .*REASON_LIMIT_EXCEEDED/],
];

describe("a request of too many entries is refused before it is decoded", () => {
  it.each(cases)("%s", async (_, call, answer) => {
    const server = await startTestServer({ maxKeysPerCall: 4 });
    server.state.initializeRank("", 0, 8, 1);
    expect(await call(server.url)).toMatch(answer);
    await server.close();
  });
});

describe("a relay refuses a request of too many entries itself, from its own --max-keys-per-call", () => {
  // The relay's gRPC goes through connect-node (it has no fast path); the rest as above.
  it.each(cases.filter(([name]) => name !== "gRPC (fast path)"))("%s", async (_, call, answer) => {
    const server = await startTestServer();
    server.state.initializeRank("", 0, 8, 1);
    const relay = await startTestRelay(server.url, { maxKeysPerCall: 4 });
    expect(await call(relay.url)).toMatch(answer);
  });

  it("gRPC", async () => {
    const server = await startTestServer();
    const relay = await startTestRelay(server.url, { maxKeysPerCall: 4 });
    expect(await grpcFastPath(relay.url)).toMatch(/^3 .*more than 80 entries/);
  });
});
