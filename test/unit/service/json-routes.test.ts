import { connect } from "node:http2";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { createMetadataClient } from "../../../src/client/index.js";
import { checkJsonValues, countJsonValues } from "../../../src/service/json/json-body.js";
import { LmdbStore } from "../../../src/store/lmdb-store.js";
import { FailingStore } from "../../support/failing-store.js";
import { tempDir } from "../../support/temp-dir.js";
import { startTestServer } from "../../support/test-server.js";

/** post sends a JSON body over HTTP/1.1 (fetch) and returns the status and the parsed body. */
async function post(url: string, path: string, body?: unknown, raw?: string) {
  const res = await fetch(`${url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: raw ?? (body === undefined ? undefined : JSON.stringify(body)),
  });
  const text = await res.text();
  return { status: res.status, body: text === "" ? undefined : (JSON.parse(text) as Record<string, unknown>), serverId: res.headers.get("hf3fs-server-id") };
}

describe("the vLLM JSON routes", () => {
  it("let an admin drop a stray rank that made every key incomplete, and a declared world_size refuses one", async () => {
    const { url } = await startTestServer();
    await post(url, "/rank/0/initialize", { num_pages: 4 });
    await post(url, "/rank/1023/initialize", { num_pages: 1 }); // anyone's stray rank: completeness now needs it too
    const [, page] = ((await post(url, "/keys/batch_allocate", { rank: 0, keys: [["a", null]] })).body!.results as [string, number][])[0]!;
    await post(url, "/keys/confirm_write", { rank: 0, confirmations: [["a", page]] });
    expect((await post(url, "/keys/batch_exists", { keys: ["a"] })).body).toEqual({ exists: [false] });
    expect(await post(url, "/rank/1023/drop", {})).toMatchObject({ status: 200, body: { forgotten_keys: 0 } });
    expect((await post(url, "/keys/batch_exists", { keys: ["a"] })).body).toEqual({ exists: [true] });
    expect((await post(url, "/rank/1023/drop", {})).body).toMatchObject({ reason: "REASON_RANK_NOT_INITIALIZED" });
    // Declared (as --vllm-world-size does for every new namespace): a rank at or above it is refused.
    expect((await post(url, "/rank/2/initialize", { num_pages: 4, namespace: "tp2", world_size: 2 })).body).toMatchObject({
      reason: "REASON_INVALID_ARGUMENT",
    });
    const declared = await startTestServer({}, undefined, 0, { vllmWorldSize: 2 });
    expect((await post(declared.url, "/rank/1/initialize", { num_pages: 4 })).status).toBe(200);
    expect((await post(declared.url, "/rank/1023/initialize", { num_pages: 1 })).body).toMatchObject({ reason: "REASON_INVALID_ARGUMENT" });
  });

  it("say when InitializeRank resized a rank, and from what", async () => {
    const { url } = await startTestServer();
    expect((await post(url, "/rank/0/initialize", { num_pages: 100 })).body).toEqual({ message: "rank 0 initialized with 100 pages" });
    expect((await post(url, "/rank/0/initialize", { num_pages: 150 })).body).toEqual({ message: "rank 0 resized from 100 to 150 pages" });
    expect((await post(url, "/rank/0/initialize", { num_pages: 150 })).body).toEqual({ message: "rank 0 already initialized with 150 pages" });
    const client = createMetadataClient({ baseUrl: url });
    expect(await client.initializeRank({ rank: 0, numPages: 120 })).toMatchObject({ created: false, numPages: 120, resizedFrom: 150 });
    expect(await client.initializeRank({ rank: 0, numPages: 120 })).toMatchObject({ created: false, resizedFrom: 0 });
  });

  it("run a full worker cycle", async () => {
    const { url, store } = await startTestServer();
    const init = await post(url, "/rank/0/initialize", { num_pages: 4, role: "worker" });
    expect(init).toMatchObject({ status: 200, body: { message: expect.stringContaining("rank 0") }, serverId: store.serverId });
    await post(url, "/rank/1/initialize", { num_pages: 4 });
    expect((await post(url, "/rank/0/initialize", { role: "scheduler" })).status).toBe(200);

    const alloc0 = await post(url, "/keys/batch_allocate", {
      rank: 0,
      keys: [
        ["a", null],
        ["b", "a"],
        ["c", ""],
      ],
    });
    expect(alloc0).toMatchObject({
      status: 200,
      body: {
        rank: 0,
        results: [
          ["a", 0],
          ["b", 1],
          ["c", 2],
        ],
      },
    });
    const alloc1 = await post(url, "/keys/batch_allocate", {
      rank: 1,
      keys: [
        ["a", null],
        ["b", "a"],
      ],
    });
    expect(alloc1.body).toEqual({
      rank: 1,
      results: [
        ["a", 0],
        ["b", 1],
      ],
    });

    expect(
      (
        await post(url, "/keys/confirm_write", {
          rank: 0,
          confirmations: [
            ["a", 0],
            ["b", 1],
          ],
          pages_to_release: [2],
        })
      ).status,
    ).toBe(204);
    expect((await post(url, "/keys/confirm_write", { rank: 1, confirmations: [["a", 0]] })).status).toBe(204);
    // Complete means confirmed on every initialized rank: a on both, b only on rank 0.
    expect((await post(url, "/keys/batch_exists", { keys: ["a", "b", "c"] })).body).toEqual({ exists: [true, false, false] });
    expect((await post(url, "/keys/get_locations", { rank: 1, keys: ["a", "b"] })).body).toEqual({ locations: [0, null] });

    expect((await post(url, "/clear")).status).toBe(204);
    expect((await post(url, "/keys/batch_exists", { keys: ["a"] })).body).toEqual({ exists: [false] });
  });

  it("answers -1 for a key that cannot get a page instead of reusing one in use", async () => {
    const { url } = await startTestServer();
    await post(url, "/rank/0/initialize", { num_pages: 1 });
    await post(url, "/keys/batch_allocate", { rank: 0, keys: [["a", null]] });
    expect((await post(url, "/keys/batch_allocate", { rank: 0, keys: [["b", null]] })).body).toEqual({ rank: 0, results: [["b", -1]] });
  });
});

describe("the SGLang JSON routes", () => {
  it("run a full worker cycle, per rank and per namespace", async () => {
    const { url } = await startTestServer();
    expect((await post(url, "/0/initialize", { num_pages: 4 })).status).toBe(204);
    expect((await post(url, "/0/initialize", { num_pages: 4 })).status).toBe(204);
    expect((await post(url, "/0/initialize", { num_pages: 4, namespace: "other" })).status).toBe(204);

    const reserved = await post(url, "/0/reserve_and_allocate_page_indices", {
      keys: [
        ["a", null],
        ["b", "a"],
      ],
    });
    expect(reserved).toMatchObject({
      status: 200,
      body: {
        indices: [
          [false, 0],
          [false, 1],
        ],
      },
    });
    expect((await post(url, "/0/confirm_write", { written_keys_to_confirm: [["a", 0]], pages_to_release: [1] })).status).toBe(204);
    expect((await post(url, "/0/exists", { keys: ["a", "b"] })).body).toEqual({ exists: [true, false] });
    expect((await post(url, "/0/exists", { keys: ["a"], namespace: "other" })).body).toEqual({ exists: [false] });
    expect((await post(url, "/0/reserve_and_allocate_page_indices", { keys: [["a", null]] })).body).toEqual({ indices: [[true, 0]] });
    expect((await post(url, "/0/get_page_indices", { keys: ["a", "b"] })).body).toEqual({ indices: [0, null] });

    expect((await post(url, "/0/delete_keys", { keys: ["a"] })).status).toBe(204);
    expect((await post(url, "/0/get_page_indices", { keys: ["a"] })).body).toEqual({ indices: [null] });
    await post(url, "/0/reserve_and_allocate_page_indices", { keys: [["c", null]] });
    expect((await post(url, "/0/clear", {})).status).toBe(204);
    expect(
      (
        await post(url, "/0/reserve_and_allocate_page_indices", {
          keys: [
            ["d", null],
            ["e", null],
            ["f", null],
            ["g", null],
            ["h", null],
          ],
        })
      ).body,
    ).toEqual({
      indices: [
        [false, expect.any(Number)],
        [false, expect.any(Number)],
        [false, expect.any(Number)],
        [false, expect.any(Number)],
        [false, -1],
      ],
    });
  });
});

describe("errors of the JSON routes", () => {
  it("map to HTTP statuses with a JSON detail, reason and code", async () => {
    const { url } = await startTestServer({ maxKeysPerCall: 4 });
    const cases: [string, unknown, number, string][] = [
      ["/keys/batch_allocate", { rank: 0, keys: [["a", null]] }, 404, "REASON_RANK_NOT_INITIALIZED"],
      ["/7/exists", { keys: ["a"] }, 404, "REASON_RANK_NOT_INITIALIZED"],
      ["/7/delete_keys", { keys: ["a"] }, 404, "REASON_RANK_NOT_INITIALIZED"],
      ["/rank/0/initialize", { num_pages: 0 }, 400, "REASON_INVALID_ARGUMENT"],
      ["/rank/0/initialize", { num_pages: -3 }, 400, "REASON_INVALID_ARGUMENT"],
      ["/rank/0/initialize", { num_pages: 8, role: "boss" }, 400, "REASON_INVALID_ARGUMENT"],
      ["/rank/0/initialize", {}, 400, "REASON_INVALID_ARGUMENT"],
      ["/rank/99999999999/initialize", { num_pages: 8 }, 400, "REASON_INVALID_ARGUMENT"],
    ];
    for (const [path, body, status, reason] of cases) {
      const reply = await post(url, path, body);
      expect({ path, status: reply.status, reason: reply.body?.reason }).toEqual({ path, status, reason });
      expect(reply.body?.detail).toEqual(expect.any(String));
    }
    await post(url, "/0/initialize", { num_pages: 8 });
    const mismatch = await post(url, "/rank/0/initialize", { num_pages: 8 }); // the vLLM routes on an SGLang namespace
    expect(mismatch).toMatchObject({ status: 409, body: { reason: "REASON_RANK_CONFIG_MISMATCH", code: "failed_precondition" } });

    const bad: [string, unknown, string | undefined][] = [
      ["/keys/batch_allocate", { rank: "0", keys: [] }, undefined],
      ["/keys/batch_allocate", { rank: 0, keys: [["a"]] }, undefined],
      ["/keys/batch_allocate", { rank: 0, keys: ["a"] }, undefined],
      ["/keys/batch_allocate", { rank: 0 }, undefined],
      ["/keys/batch_exists", { keys: [1, 2] }, undefined],
      ["/0/confirm_write", { written_keys_to_confirm: [["a", "zero"]] }, undefined],
      ["/0/confirm_write", { written_keys_to_confirm: [], pages_to_release: [1.5] }, undefined],
      ["/0/exists", undefined, "{not json"],
      ["/0/exists", undefined, "[1,2]"],
      [
        "/0/reserve_and_allocate_page_indices",
        {
          keys: [
            ["a", null],
            ["b", null],
            ["c", null],
            ["d", null],
            ["e", null],
          ],
        },
        undefined,
      ],
    ];
    for (const [path, body, raw] of bad) {
      const reply = await post(url, path, body, raw);
      expect({ path, body, raw, status: reply.status }).toEqual({ path, body, raw, status: 400 });
    }
    expect((await post(url, "/no/such/route", {})).status).toBe(404);
    expect((await fetch(`${url}/keys/batch_exists`)).status).toBe(405);
  });

  it("apply nothing of a batch that fails, and refuse releasing a used page", async () => {
    const { url } = await startTestServer();
    await post(url, "/0/initialize", { num_pages: 8 });
    await post(url, "/0/reserve_and_allocate_page_indices", {
      keys: [
        ["a", null],
        ["b", null],
      ],
    });
    const partial = await post(url, "/0/confirm_write", {
      written_keys_to_confirm: [
        ["a", 0],
        ["b", 5],
      ],
    });
    expect(partial).toMatchObject({ status: 409, body: { reason: "REASON_RESERVATION_NOT_FOUND" } });
    expect((await post(url, "/0/exists", { keys: ["a", "b"] })).body).toEqual({ exists: [false, false] });
    await post(url, "/0/confirm_write", { written_keys_to_confirm: [["a", 0]] });
    expect(await post(url, "/0/confirm_write", { written_keys_to_confirm: [], pages_to_release: [0] })).toMatchObject({
      status: 409,
      body: { reason: "REASON_PAGE_IN_USE" },
    });
    const outOfRange = await post(url, "/0/confirm_write", { written_keys_to_confirm: [["b", 8]] });
    expect(outOfRange).toMatchObject({ status: 400, body: { reason: "REASON_PAGE_OUT_OF_RANGE" } });
  });

  it("refuse invalid UTF-8 and lone surrogates with 400, so two byte strings never become one key", async () => {
    const { url, state } = await startTestServer();
    await post(url, "/rank/0/initialize", { num_pages: 8 });
    const send = (bytes: Buffer) =>
      fetch(`${url}/keys/batch_allocate`, { method: "POST", headers: { "content-type": "application/json" }, body: bytes }).then(async (res) => ({
        status: res.status,
        body: (await res.json()) as Record<string, unknown>,
      }));
    for (const bad of [Buffer.from([0xff]), Buffer.from([0xfe])]) {
      const bytes = Buffer.concat([Buffer.from('{"rank": 0, "keys": [["bad'), bad, Buffer.from('", null]]}')]);
      expect(await send(bytes)).toMatchObject({ status: 400, body: { reason: "REASON_INVALID_ARGUMENT" } });
    }
    for (const escaped of ['"bad\\ud800"', '"\\udc00"', '"a\\ud800b"']) {
      const body = Buffer.from(`{"rank": 0, "keys": [[${escaped}, null]]}`);
      expect(await send(body)).toMatchObject({ status: 400, body: { reason: "REASON_INVALID_ARGUMENT" } });
    }
    expect(await post(url, "/keys/batch_exists", { keys: ["ok", "\ud83d\udd11"] })).toMatchObject({ status: 200 });
    expect(state.stats(undefined)[0]!.ranks[0]!.reservedPages).toBe(0);
  });

  it("answer 413 for a body over the limit", async () => {
    const { url } = await startTestServer();
    const huge = JSON.stringify({ keys: Array.from({ length: 40_000 }, (_, i) => `${i}`.padStart(30, "0")) });
    expect(huge.length).toBeGreaterThan(1 << 20);
    const reply = await post(url, "/0/exists", undefined, huge);
    expect(reply).toMatchObject({ status: 413, body: { reason: "REASON_LIMIT_EXCEEDED" } });
  });

  it("answer 413 for a chunked body that grows over the limit, on a connection that stays usable", async () => {
    const { url } = await startTestServer();
    const { request } = await import("node:http");
    const reply = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = request(`${url}/0/exists`, { method: "POST", headers: { "content-type": "application/json" } }, (res) => {
        let body = "";
        res.on("data", (d: Buffer) => (body += d));
        res.on("end", () => resolve({ status: res.statusCode!, body }));
      });
      req.on("error", reject);
      req.write('{"keys": [');
      for (let i = 0; i < 40; i++) req.write(`${JSON.stringify("x".repeat(40_000))},`);
      req.end('"y"]}');
    });
    expect(reply.status).toBe(413);
    expect(JSON.parse(reply.body)).toMatchObject({ reason: "REASON_LIMIT_EXCEEDED" });
  });

  it("answer 503 when the store failed", async () => {
    const store = new FailingStore(await LmdbStore.open(tempDir()));
    const { url } = await startTestServer({}, store);
    await post(url, "/0/initialize", { num_pages: 8 });
    store.breakNow();
    expect(await post(url, "/0/reserve_and_allocate_page_indices", { keys: [["a", null]] })).toMatchObject({
      status: 503,
      body: { reason: "REASON_STORE_UNAVAILABLE", code: "unavailable" },
    });
    expect((await post(url, "/0/exists", { keys: ["a"] })).status).toBe(503);
    await store.close();
  });
});

describe("the JSON routes and the gRPC API", () => {
  it("see one state: allocate via JSON, confirm via gRPC, look up via JSON", async () => {
    const { url } = await startTestServer();
    const client = createMetadataClient({ baseUrl: url, retry: { deadlineMs: 0 } });
    await post(url, "/rank/0/initialize", { num_pages: 16 });
    const { body } = await post(url, "/keys/batch_allocate", {
      rank: 0,
      keys: [
        ["k1", null],
        ["k2", "k1"],
      ],
    });
    const results = body!.results as [string, number][];
    await client.confirmWrite({ rank: 0, keys: results.map(([k]) => k), pages: results.map(([, p]) => p) });
    expect((await post(url, "/keys/get_locations", { rank: 0, keys: ["k1", "k2", "k3"] })).body).toEqual({ locations: [results[0]![1], results[1]![1], null] });
    expect((await post(url, "/0/get_page_indices", { keys: ["k2"] })).body).toEqual({ indices: [results[1]![1]] });
  });
});

describe("the JSON routes over HTTP/2", () => {
  it("answer like over HTTP/1.1", async () => {
    const { url } = await startTestServer();
    await post(url, "/0/initialize", { num_pages: 8 });
    const session = connect(url);
    try {
      const reply = await new Promise<{ status: number; body: string }>((resolve, reject) => {
        const stream = session.request({ ":method": "POST", ":path": "/0/exists", "content-type": "application/json" });
        let body = "";
        let status = 0;
        stream.on("response", (headers) => (status = Number(headers[":status"])));
        stream.on("data", (d: Buffer) => (body += d));
        stream.on("end", () => resolve({ status, body }));
        stream.on("error", reject);
        stream.end(JSON.stringify({ keys: ["a"] }));
      });
      expect(reply).toEqual({ status: 200, body: JSON.stringify({ exists: [false] }) });
    } finally {
      session.close();
    }
  });
});

describe("countJsonValues", () => {
  it("counts the values of any JSON text, plus one per empty container, whatever its strings hold", () => {
    const count = (value: unknown): { values: number; empties: number } => {
      const members = Array.isArray(value) ? value : value !== null && typeof value === "object" ? Object.values(value) : undefined;
      if (members === undefined) return { values: 1, empties: 0 };
      const total = { values: 1, empties: members.length === 0 ? 1 : 0 };
      for (const member of members) {
        const inner = count(member);
        total.values += inner.values;
        total.empties += inner.empties;
      }
      return total;
    };
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 4 }), (value) => {
        const { values, empties } = count(value);
        expect(countJsonValues(Buffer.from(JSON.stringify(value)), Number.MAX_SAFE_INTEGER)).toBe(values + empties);
      }),
      { numRuns: 500 },
    );
    expect(countJsonValues(Buffer.from(String.raw`["a\\",",[{","\"[,"]`), 100)).toBe(4);
  });

  it("refuses through checkJsonValues exactly the texts of more values than the limit, short ones uncounted included", () => {
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 3 }), fc.integer({ min: 1, max: 60 }), (value, maxValues) => {
        const bytes = Buffer.from(JSON.stringify(value));
        const over = countJsonValues(bytes, Number.MAX_SAFE_INTEGER) > maxValues;
        if (over) expect(() => checkJsonValues(bytes, maxValues)).toThrow(/more than/);
        else checkJsonValues(bytes, maxValues);
      }),
      { numRuns: 1_000 },
    );
    // "[]" is 2 values in 2 bytes, as many as a text can have: a text shorter than the limit is within it.
    expect(() => checkJsonValues(Buffer.from("[]"), 2)).not.toThrow();
    expect(() => checkJsonValues(Buffer.from("[]"), 1)).toThrow(/more than 1 /);
    expect(() => checkJsonValues(Buffer.from("[1,2,3]"), 4)).not.toThrow();
    expect(() => checkJsonValues(Buffer.from("[1,2,3]"), 3)).toThrow(/more than 3 /);
  });
});
