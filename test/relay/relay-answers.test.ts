import { Code, createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { describe, expect, it } from "vitest";
import { ErrorInfoSchema, KeyScope, MetadataService, Role } from "../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { SERVER_ID_HEADER } from "../../src/protocol/headers.js";
import { startTestRelay } from "../support/test-relay.js";
import { startTestServer } from "../support/test-server.js";
import { startTestShards } from "../support/test-shards.js";
import { until } from "../support/until.js";

/** JSON_CALLS are calls of both JSON dialects, in order, meant to meet every route and every error status the routes answer. */
const JSON_CALLS: [method: string, path: string, body?: string][] = [
  ["POST", "/rank/0/initialize", '{"num_pages": 8}'],
  ["POST", "/rank/0/initialize", '{"num_pages": 8}'], // already initialized
  ["POST", "/rank/0/initialize", '{"num_pages": 8, "world_size": 2}'], // 409 mismatch
  ["POST", "/rank/1/initialize", '{"role": "scheduler"}'],
  ["POST", "/rank/1/initialize", '{"role": "nobody"}'], // 400
  ["POST", "/keys/batch_allocate", '{"rank": 0, "keys": [["a", ""], ["b", "a"], ["c", null]]}'],
  ["POST", "/keys/batch_allocate", '{"rank": 0, "keys": [["a", ""]]}'], // a retry: the same page
  ["POST", "/keys/batch_allocate", '{"rank": 9, "keys": [["a", ""]]}'], // 404 rank not initialized
  ["POST", "/keys/batch_allocate", '{"rank": 0, "keys": "a"}'], // 400 malformed
  ["POST", "/keys/confirm_write", '{"rank": 0, "confirmations": [["a", 0], ["b", 1]]}'],
  ["POST", "/keys/confirm_write", '{"rank": 0, "confirmations": [["zz", 5]]}'], // 409 no reservation
  ["POST", "/keys/confirm_write", '{"rank": 0, "confirmations": [["a", 99]]}'], // 400 page out of range
  ["POST", "/keys/batch_allocate", '{"rank": 4294967296, "keys": [["w", null]]}'], // 400: encoded, 2^32 would be rank 0
  ["POST", "/keys/batch_allocate", '{"rank": -1, "keys": [["w", null]]}'], // 400: encoded, -1 would be 4294967295
  ["POST", "/rank/0/initialize", '{"num_pages": 4294967306}'], // 400: encoded, it would resize rank 0 to 10 pages
  ["POST", "/rank/4294967296/initialize", '{"num_pages": 8}'], // 400
  ["POST", "/keys/confirm_write", '{"rank": 0, "confirmations": [["b", 2147483649]]}'], // 400: encoded, a negative page
  ["POST", "/keys/get_locations", '{"rank": 0, "keys": ["a", "b"]}'], // a and b where they were
  ["POST", "/keys/batch_exists", '{"keys": ["a", "b", "c", "none"]}'],
  ["POST", "/keys/get_locations", '{"rank": 0, "keys": ["a", "none"]}'],
  ["POST", "/keys/batch_exists", "not json"], // 400
  ["POST", "/keys/batch_exists", "[1]"], // 400, not an object
  ["GET", "/keys/batch_exists"], // 405
  ["POST", "/no/such/route", "{}"], // 404
  ["POST", "/rank/5/drop", "{}"], // 404
  ["POST", "/0/initialize", '{"namespace": "sg", "num_pages": 4}'],
  ["POST", "/1/initialize", '{"namespace": "sg", "num_pages": 4}'],
  ["POST", "/0/reserve_and_allocate_page_indices", '{"namespace": "sg", "keys": [["x", null], ["y", "x"]]}'],
  ["POST", "/0/confirm_write", '{"namespace": "sg", "written_keys_to_confirm": [["x", 0], ["y", 1]], "pages_to_release": []}'],
  ["POST", "/0/reserve_and_allocate_page_indices", '{"namespace": "sg", "keys": [["x", null]]}'], // existing
  ["POST", "/0/exists", '{"namespace": "sg", "keys": ["x", "y", "z"]}'],
  ["POST", "/1/exists", '{"namespace": "sg", "keys": ["x"]}'],
  ["POST", "/7/exists", '{"namespace": "sg", "keys": ["x"]}'], // 404
  ["POST", "/0/get_page_indices", '{"namespace": "sg", "keys": ["x", "z"]}'],
  ["POST", "/0/delete_keys", '{"namespace": "sg", "keys": ["y"]}'],
  ["POST", "/0/exists", '{"namespace": "sg", "keys": ["x", "y"]}'],
  ["POST", "/0/clear", '{"namespace": "sg"}'],
  ["POST", "/7/clear", '{"namespace": "sg"}'], // 404
  ["POST", "/0/exists", '{"namespace": "sg", "keys": ["x"]}'],
  ["POST", "/rank/0/initialize", '{"namespace": "sg", "num_pages": 4}'], // 409: an SGLang namespace on the vLLM routes
  ["POST", "/rank/0/drop", "{}"],
  ["POST", "/clear", ""],
  ["POST", "/keys/batch_exists", '{"keys": ["a"]}'],
];

/** jsonAnswer is what a JSON caller sees of a call: status, body, content type, redirect, and whether a server id came with it. */
async function jsonAnswer(url: string, [method, path, body]: (typeof JSON_CALLS)[number]) {
  const res = await fetch(`${url}${path}`, { method, body, headers: { "content-type": "application/json" }, redirect: "manual" });
  return {
    status: res.status,
    body: await res.text(),
    contentType: res.headers.get("content-type"),
    allow: res.headers.get("allow"),
    location: res.headers.get("location"),
  };
}

const TRANSPORTS = [
  ["gRPC", (baseUrl: string) => createGrpcTransport({ baseUrl })],
  ["Connect", (baseUrl: string) => createConnectTransport({ baseUrl, httpVersion: "1.1" })],
  ["gRPC-Web", (baseUrl: string) => createGrpcWebTransport({ baseUrl, httpVersion: "2" })],
] as const;

describe("a relay answers as the server behind it", () => {
  it("every JSON route and error status of both dialects: the same status, body and content type, with the upstream's server id", async () => {
    const direct = await startTestServer();
    const behind = await startTestServer();
    const relay = await startTestRelay(behind.url);
    for (const call of JSON_CALLS) {
      const [fromServer, fromRelay] = [await jsonAnswer(direct.url, call), await jsonAnswer(relay.url, call)];
      expect({ call, ...fromRelay }).toEqual({ call, ...fromServer });
    }
    // The server id the relay passes on is that of the server that answered, on answers and on errors.
    const behindId = (await fetch(`${behind.url}/keys/batch_exists`, { method: "POST", body: "{}" })).headers.get(SERVER_ID_HEADER);
    for (const path of ["/keys/batch_exists", "/keys/get_locations"]) {
      const res = await fetch(`${relay.url}${path}`, { method: "POST", body: '{"rank": 0, "keys": []}' });
      expect(res.headers.get(SERVER_ID_HEADER)).toBe(behindId);
    }
  });

  it("a bad call of either JSON dialect, in front of 2 shards: the same status and body as one server's", async () => {
    const direct = await startTestServer();
    const shards = await Promise.all([0, 1].map((shard) => startTestServer({ shards: 2, shard })));
    const relay = await startTestRelay(shards.map((s) => s.url).join(";"));
    const keys = (prefix: string) => Array.from({ length: 8 }, (_, i) => `${prefix}${i}`);
    const bad: (typeof JSON_CALLS)[number][] = [
      ["POST", "/rank/0/initialize", '{"num_pages": 64}'],
      ["POST", "/keys/batch_allocate", JSON.stringify({ rank: 0, keys: [...keys("k").map((k) => [k, null]), ["", null]] })],
      ["POST", "/keys/batch_allocate", JSON.stringify({ rank: 0, keys: keys("k").map((k, i) => [k, i === 5 ? k : null]) })],
      ["POST", "/keys/confirm_write", JSON.stringify({ rank: 0, confirmations: keys("k").map((k, i) => [k, i === 6 ? 99 : i]) })],
      ["POST", "/0/initialize", '{"namespace": "sg", "num_pages": 64}'],
      ["POST", "/0/confirm_write", JSON.stringify({ namespace: "sg", written_keys_to_confirm: [], pages_to_release: [2, 3, -1] })],
      ["POST", "/0/exists", JSON.stringify({ namespace: "sg", keys: [...keys("k"), ""] })],
    ];
    for (const call of bad) {
      const [fromServer, fromRelay] = [await jsonAnswer(direct.url, call), await jsonAnswer(relay.url, call)];
      expect({ call, ...fromRelay }).toEqual({ call, ...fromServer });
    }
  });

  it("a call over the servers' limits, in front of 2 shards: refused whole, as one server and a member refuse it, once the topology named them", async () => {
    const limits = { maxKeysPerCall: 20, maxKeyBytes: 64 };
    const [direct, shards] = await Promise.all([startTestServer(limits), startTestShards(2, limits)]);
    const relay = await startTestRelay(shards.map((s) => s.url).join(";"));
    // 30 keys: over the limit whole, within it on each shard (about 15 each).
    const keys = Array.from({ length: 30 }, (_, i) => `k${i}`);
    const json: (typeof JSON_CALLS)[number][] = [
      ["POST", "/keys/batch_exists", JSON.stringify({ keys })],
      ["POST", "/0/exists", JSON.stringify({ namespace: "sg", keys })],
    ];
    const grpc = async (url: string) => {
      const client = createClient(MetadataService, createGrpcTransport({ baseUrl: url }));
      const refusal = (error: import("@connectrpc/connect").ConnectError) => ({
        code: error.code,
        message: error.rawMessage,
        info: error.findDetails(ErrorInfoSchema)[0],
      });
      return [
        await client.batchExists({ keys }).catch(refusal),
        await client.getLocations({ rank: 0, keys }).catch(refusal),
        await client.batchAllocate({ rank: 0, keys: [...keys.slice(0, 3), "x".repeat(65)] }).catch(refusal),
      ];
    };
    const init: (typeof JSON_CALLS)[number] = ["POST", "/0/initialize", '{"namespace": "sg", "num_pages": 64}'];
    for (const url of [direct.url, relay.url]) expect((await jsonAnswer(url, init)).status).toBe(204);
    // The relay reads the topology as it starts; until it has, each shard holds only its part to the limits.
    await until(async () => (await jsonAnswer(relay.url, json[0]!)).status === 400, 5_000);
    for (const call of json) {
      const fromServer = await jsonAnswer(direct.url, call);
      expect(fromServer.status).toBe(400);
      expect({ call, ...(await jsonAnswer(relay.url, call)) }).toEqual({ call, ...fromServer });
      expect({ call, ...(await jsonAnswer(shards[1]!.url, call)) }).toEqual({ call, ...fromServer });
    }
    const fromServer = await grpc(direct.url);
    expect(fromServer.map((answer) => (answer as { code?: number }).code)).toEqual([Code.InvalidArgument, Code.InvalidArgument, Code.InvalidArgument]);
    expect(await grpc(relay.url)).toEqual(fromServer);
    expect(await grpc(shards[0]!.url)).toEqual(fromServer);
  });

  it.each(TRANSPORTS)("every MetadataService call over %s: the same responses, codes, messages, ErrorInfo and server ids", async (_, transport) => {
    const direct = await startTestServer();
    const behind = await startTestServer();
    const relay = await startTestRelay(behind.url);
    const answers = async (url: string) => {
      const client = createClient(MetadataService, transport(url));
      const out: unknown[] = [];
      type O = { onHeader(h: Headers): void };
      const run = async (call: (o: O) => Promise<unknown>) => {
        let serverId: string | null = null;
        const onHeader = (h: Headers) => (serverId = h.get(SERVER_ID_HEADER));
        try {
          const response = await call({ onHeader });
          out.push({ response, serverId });
        } catch (e) {
          const error = e as import("@connectrpc/connect").ConnectError;
          out.push({
            code: error.code,
            message: error.rawMessage,
            info: error.findDetails(ErrorInfoSchema)[0],
            serverId: error.metadata.get(SERVER_ID_HEADER),
          });
        }
      };
      await run((o: O) => client.initializeRank({ rank: 0, numPages: 8, worldSize: 1 }, o));
      await run((o: O) => client.initializeRank({ rank: 0, numPages: 9, worldSize: 1 }, o));
      await run((o: O) => client.initializeRank({ rank: 1, role: Role.WORKER, numPages: 0 }, o));
      await run((o: O) => client.initializeRank({ namespace: "r", rank: 0, numPages: 4, newKeyScope: KeyScope.RANK }, o));
      await run((o: O) => client.batchAllocate({ rank: 0, keys: ["a", "b"] }, o));
      await run((o: O) => client.batchAllocate({ rank: 3, keys: ["a"] }, o));
      await run((o: O) => client.confirmWrite({ rank: 0, keys: ["a"], pages: [0] }, o));
      await run((o: O) => client.confirmWrite({ rank: 0, keys: ["q"], pages: [7] }, o));
      await run((o: O) => client.batchExists({ keys: ["a", "b"] }, o));
      await run((o: O) => client.batchExists({ namespace: "r", keys: ["a"], callerRank: 2 }, o));
      await run((o: O) => client.getLocations({ rank: 0, keys: ["a", "b"], includeIncomplete: true }, o));
      await run((o: O) => client.deleteKeys({ keys: ["a"], rank: 0 }, o));
      await run((o: O) => client.getStats({ allNamespaces: true }, o));
      await run((o: O) => client.clear({ namespace: "r", callerRank: 0 }, o));
      await run((o: O) => client.dropRank({ rank: 5 }, o));
      await run((o: O) => client.dropRank({ rank: 0 }, o));
      return out;
    };
    const [fromServer, fromRelay] = [await answers(direct.url), await answers(relay.url)];
    // Server ids differ by server: each answer's (and InitializeRank's server_id field) must name the server that answered.
    const withoutIds = (list: unknown[]) =>
      list.map((a) => {
        const answer = a as { response?: { serverId?: string } };
        return { ...answer, serverId: undefined, response: answer.response && { ...answer.response, serverId: undefined } };
      });
    expect(withoutIds(fromRelay)).toEqual(withoutIds(fromServer));
    const behindId = (await fetch(`${behind.url}/keys/batch_exists`, { method: "POST", body: "{}" })).headers.get(SERVER_ID_HEADER)!;
    for (const answer of fromRelay as { serverId: string | null; response?: { serverId?: string } }[]) {
      expect(answer.serverId?.split(",")[0]?.trim()).toBe(behindId);
      if (answer.response?.serverId !== undefined) expect(answer.response.serverId).toBe(behindId);
    }
  });
});
