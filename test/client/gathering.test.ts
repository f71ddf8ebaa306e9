import { create, toBinary } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { type BatchRequest, BatchRequestSchema, BatchResponseSchema, ErrorInfoSchema, Reason } from "../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { bytesOf, Gathering, type Sent } from "../../src/client/gathering.js";
import type { Method } from "../../src/client/leader-following.js";
import { BATCH_CODECS } from "../../src/framing/grpc/batch-codecs.js";

/** Upstream is a fake upstream: each send waits until the test answers it. */
class Upstream {
  readonly sends: { method: Method; request: unknown; answer(sent: Partial<Sent>): void; fail(error: unknown): void }[] = [];
  now = 0;
  /** batches are the sizes of the Batches sent, as onBatch heard them. */
  readonly batches: number[] = [];
  readonly gathering: Gathering;

  constructor(maxBodyBytes = 1 << 20) {
    this.gathering = new Gathering(
      (method, request) =>
        new Promise<Sent>((resolve, reject) =>
          this.sends.push({ method, request, answer: (sent) => resolve({ serverId: "s1", attempts: 1, response: undefined, ...sent }), fail: reject }),
        ),
      { maxKeysPerCall: 16, maxBodyBytes },
      1_000,
      (calls) => this.batches.push(calls),
      () => this.now,
    );
  }

  /** twoOnTheirWay makes two calls, each in a turn of its own: each goes alone (sends[0] and [1]). */
  async twoOnTheirWay(): Promise<void> {
    void this.call("batchExists", exists("a"));
    await flush();
    void this.call("batchExists", exists("b"));
    await flush();
  }

  /** gathered has two calls on their way, then makes one per key, which wait; the first call is answered, and the waiting ones leave as a Batch (sends[2]). */
  async gathered(...keys: string[]): Promise<Promise<Sent>[]> {
    await this.twoOnTheirWay();
    const waiting = keys.map((key) => this.call("batchExists", exists(key)));
    await flush();
    this.sends[0]!.answer({});
    await flush();
    return waiting;
  }

  call(method: Method, request: object, signal?: AbortSignal): Promise<Sent> {
    return this.gathering.call(method, request, signal && { signal }, 1_000);
  }

  /** answerBatch answers the Batch sent `at` with each call's response (every key exists, at page 7), or an error for the keys named "bad". */
  answerBatch(at: number): void {
    const { request, answer } = this.sends[at]!;
    const results = (request as BatchRequest).calls.map(({ call }) =>
      (call.value as { keys: string[] }).keys.includes("bad")
        ? {
            result: {
              case: "error" as const,
              value: { code: Code.FailedPrecondition, message: "rank 9 is not initialized", info: { reason: Reason.RANK_NOT_INITIALIZED } },
            },
          }
        : call.case === "batchExists"
          ? { result: { case: call.case, value: { exists: call.value.keys.map(() => true) } } }
          : { result: { case: call.case!, value: { pages: (call.value as { keys: string[] }).keys.map(() => 7) } } },
    );
    answer({ response: create(BatchResponseSchema, { results: results as never }) });
  }
}

const exists = (...keys: string[]) => ({ namespace: "kv", keys });
const flush = () => new Promise((resolve) => setImmediate(resolve));

describe("Gathering (a relay's calls to one shard)", () => {
  it("sends the calls of one turn together as one Batch, a lone call alone", async () => {
    const up = new Upstream();
    const calls = [up.call("batchExists", exists("a")), up.call("getLocations", exists("b"))];
    expect(up.sends).toHaveLength(0);
    await flush();
    expect(up.sends.map((s) => s.method)).toEqual(["batch"]);
    const lone = up.call("batchExists", exists("c"));
    await flush();
    expect([up.sends[1]!.method, (up.sends[1]!.request as { keys: string[] }).keys]).toEqual(["batchExists", ["c"]]);
    up.answerBatch(0);
    up.sends[1]!.answer({ response: "c's answer" });
    expect((await Promise.all(calls)).map((a) => a.response)).toEqual([expect.objectContaining({ exists: [true] }), expect.objectContaining({ pages: [7] })]);
    expect((await lone).response).toBe("c's answer");
    expect(up.batches).toEqual([2]);
  });

  it("holds the calls that come while two are on their way, and sends them together as one Batch when one comes back", async () => {
    const up = new Upstream();
    const calls = [up.call("batchExists", exists("a"))];
    await flush();
    calls.push(up.call("batchExists", exists("b")));
    await flush();
    calls.push(up.call("batchExists", exists("c")));
    await flush();
    calls.push(up.call("getLocations", exists("d")));
    await flush();
    expect(up.sends.map((s) => s.method)).toEqual(["batchExists", "batchExists"]);
    up.sends[0]!.answer({ response: "a's answer" });
    await flush();
    expect(up.sends.map((s) => s.method)).toEqual(["batchExists", "batchExists", "batch"]);
    expect((up.sends[2]!.request as BatchRequest).calls.map((c) => [c.call.case, (c.call.value as { keys: string[] }).keys])).toEqual([
      ["batchExists", ["c"]],
      ["getLocations", ["d"]],
    ]);
    up.sends[1]!.answer({ response: "b's answer" });
    up.answerBatch(2);
    const answers = await Promise.all(calls);
    expect(answers.map((a) => a.response)).toEqual([
      "a's answer",
      "b's answer",
      expect.objectContaining({ exists: [true] }),
      expect.objectContaining({ pages: [7] }),
    ]);
    expect(answers[3]!.serverId).toBe("s1");
    expect(up.batches).toEqual([2]);
  });

  it("gives a call of a Batch its own error (code, message, ErrorInfo, server id), and the others their answers", async () => {
    const up = new Upstream();
    const good = up.call("batchExists", exists("c"));
    const bad = up.call("batchAllocate", { namespace: "kv", rank: 9, keys: ["bad"] });
    await flush();
    up.answerBatch(0);
    expect((await good).response).toMatchObject({ exists: [true] });
    const error = await bad.catch((e: unknown) => e as ConnectError);
    expect(error).toBeInstanceOf(ConnectError);
    expect([(error as ConnectError).code, (error as ConnectError).rawMessage, (error as ConnectError).metadata.get("hf3fs-server-id")]).toEqual([
      Code.FailedPrecondition,
      "rank 9 is not initialized",
      "s1",
    ]);
  });

  it("sends again alone, held as any call, a call of a Batch that was UNAVAILABLE there", async () => {
    const up = new Upstream();
    const [c, d] = await up.gathered("c", "d");
    const { answer } = up.sends[2]!;
    answer({
      response: create(BatchResponseSchema, {
        results: [
          { result: { case: "error", value: { code: Code.Unavailable, message: "shard 1 unreachable", info: { reason: Reason.UPSTREAM_UNAVAILABLE } } } },
          { result: { case: "batchExists", value: { exists: [true] } } },
        ],
      }),
    });
    expect((await d!).response).toMatchObject({ exists: [true] });
    expect([up.sends[3]!.method, (up.sends[3]!.request as { keys: string[] }).keys]).toEqual(["batchExists", ["c"]]);
    up.sends[3]!.answer({ response: "c alone" });
    expect((await c!).response).toBe("c alone");
  });

  it("never holds back the calls a Batch does not carry (InitializeRank, the admin calls)", async () => {
    const up = new Upstream();
    await up.twoOnTheirWay();
    void up.call("initializeRank", { namespace: "kv", rank: 0 });
    void up.call("clear", { namespace: "kv" });
    expect(up.sends.map((s) => s.method)).toEqual(["batchExists", "batchExists", "initializeRank", "clear"]);
  });

  it("holds a Batch to MAX_CALLS calls and to the entries of one call at the key limit, and sends a call larger than that alone", async () => {
    const up = new Upstream(); // 16 keys per call: 4 * 16 + 64 = 128 entries, each call of 20 keys counted 28
    await up.twoOnTheirWay();
    const twenty = Array.from({ length: 20 }, (_, i) => `k${i}`);
    for (let i = 0; i < 5; i++) void up.call("batchExists", exists(...twenty));
    void up.call("batchExists", exists(...Array.from({ length: 130 }, (_, i) => `k${i}`)));
    expect(up.sends).toHaveLength(3); // the 130 keys went alone (the key limit is the server's to refuse)
    up.sends[0]!.answer({});
    up.sends[2]!.answer({});
    await flush();
    expect((up.sends[3]!.request as BatchRequest).calls).toHaveLength(4); // 4 * 28 = 112 <= 128 < 140
    up.sends[1]!.answer({});
    await flush();
    expect(up.sends[4]!.method).toBe("batchExists"); // the fifth, alone
  });

  it("holds a Batch to the server's body limit by an upper bound of its bytes, and sends a call past it alone", async () => {
    // A call of "kv" and two keys of 50 characters is bounded at 64 + 3 * 2 + 2 * (6 + 3 * 50) = 382 bytes: two fit in 1,000, three do not.
    const up = new Upstream(1_000);
    const key = (i: number) => String(i).padStart(50, "k");
    await up.twoOnTheirWay();
    for (let i = 0; i < 3; i++) void up.call("batchExists", exists(key(2 * i), key(2 * i + 1)));
    void up.call("batchExists", exists(...Array.from({ length: 7 }, (_, i) => key(i)))); // 1,162 bytes: alone
    expect(up.sends).toHaveLength(3);
    expect((up.sends[2]!.request as { keys: string[] }).keys).toHaveLength(7);
    up.sends[0]!.answer({});
    up.sends[2]!.answer({});
    await flush();
    expect((up.sends[3]!.request as BatchRequest).calls).toHaveLength(2);
    up.sends[1]!.answer({});
    await flush();
    expect((up.sends[4]!.request as { keys: string[] }).keys).toEqual([key(4), key(5)]); // the third, alone: a Batch of one is a call
  });

  it("makes its Batches half as large after a server refused one for its size (its limits lower than the ones given)", async () => {
    const up = new Upstream(); // 128 entries; each call of 20 keys counts 28
    const twenty = Array.from({ length: 20 }, (_, i) => `k${i}`);
    const gather = async (): Promise<BatchRequest> => {
      const sent = up.sends.length;
      await up.twoOnTheirWay();
      for (let i = 0; i < 4; i++) void up.call("batchExists", exists(...twenty));
      await flush();
      up.sends[sent]!.answer({});
      await flush();
      up.sends[sent + 1]!.answer({});
      return up.sends[sent + 2]!.request as BatchRequest;
    };
    expect((await gather()).calls).toHaveLength(4);
    const refused = new ConnectError("the request has more than 100 entries", Code.InvalidArgument, undefined, [
      { desc: ErrorInfoSchema, value: { reason: Reason.LIMIT_EXCEEDED } },
    ]);
    up.sends[2]!.fail(refused);
    await flush();
    expect(up.sends.slice(3).map((s) => s.method)).toEqual(["batchExists", "batchExists", "batchExists", "batchExists"]); // each again, alone
    for (const send of up.sends.slice(3)) send.answer({});
    await flush();
    // 112 entries refused: the next Batches hold at most 56, two such calls.
    const next = await gather();
    expect(next.calls).toHaveLength(2);
  });

  it("sends again call by call a Batch refused as a whole, and calls alone for a minute after a server that does not know Batch", async () => {
    const up = new Upstream();
    const [c, d] = await up.gathered("c", "d");
    up.sends[2]!.fail(new ConnectError("unknown method hf3fs.metadata.v1.MetadataService/Batch", Code.Unimplemented));
    await flush();
    expect(up.sends.slice(3).map((s) => [s.method, (s.request as { keys: string[] }).keys])).toEqual([
      ["batchExists", ["c"]],
      ["batchExists", ["d"]],
    ]);
    up.sends[3]!.answer({ response: "c alone" });
    up.sends[4]!.answer({ response: "d alone" });
    expect([(await c!).response, (await d!).response]).toEqual(["c alone", "d alone"]);
    // Within the minute, calls past the two on their way still go alone.
    void up.call("batchExists", exists("e"));
    expect(up.sends.at(-1)!.method).toBe("batchExists");
    up.now = 60_001;
    void up.call("batchExists", exists("f"));
    void up.call("batchExists", exists("g"));
    const sent = up.sends.length;
    up.sends[1]!.answer({});
    await flush();
    expect(up.sends.slice(sent).map((s) => s.method)).toEqual(["batch"]);
  });

  it("fails every call of a Batch whose hold was spent (UNAVAILABLE), without sending them again", async () => {
    const up = new Upstream();
    const [c, d] = await up.gathered("c", "d");
    up.sends[2]!.fail(new ConnectError("relay: no server answered", Code.Unavailable));
    await expect(c).rejects.toMatchObject({ code: Code.Unavailable });
    await expect(d).rejects.toMatchObject({ code: Code.Unavailable });
    expect(up.sends).toHaveLength(3);
  });

  it("drops a waiting call whose caller left (CANCELED), and sends the rest", async () => {
    const up = new Upstream();
    await up.twoOnTheirWay();
    const left = new AbortController();
    const gone = up.call("batchExists", exists("c"), left.signal);
    void up.call("batchExists", exists("d"));
    left.abort();
    await expect(gone).rejects.toMatchObject({ code: Code.Canceled });
    up.sends[0]!.answer({});
    await flush();
    expect([up.sends[2]!.method, (up.sends[2]!.request as { keys: string[] }).keys]).toEqual(["batchExists", ["d"]]);
  });
});

describe("bytesOf, the Batch's byte bound", () => {
  it("is at least the bytes a call adds to a Batch as protobuf-es encodes it, whatever its strings and pages", () => {
    const text = fc.string({ unit: "binary", maxLength: 40 }); // any code point, surrogate pairs included
    const pages = fc.array(fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }), { maxLength: 20 });
    const call = fc.oneof(
      fc.record({
        case: fc.constant("batchAllocate" as const),
        value: fc.record({ namespace: text, rank: fc.nat(), keys: fc.array(text), prefixKeys: fc.array(text) }),
      }),
      fc.record({
        case: fc.constant("confirmWrite" as const),
        value: fc.record({ namespace: text, rank: fc.nat(), keys: fc.array(text), pages, pagesToRelease: pages, keysToRelease: fc.array(text) }),
      }),
      fc.record({
        case: fc.constant("batchExists" as const),
        value: fc.record({ namespace: text, keys: fc.array(text), rank: fc.nat(), callerRank: fc.nat() }),
      }),
      fc.record({
        case: fc.constant("getLocations" as const),
        value: fc.record({ namespace: text, rank: fc.nat(), keys: fc.array(text), includeIncomplete: fc.boolean() }),
      }),
    );
    fc.assert(
      fc.property(fc.array(call, { minLength: 1, maxLength: 4 }), (calls) => {
        const encoded = toBinary(BatchRequestSchema, create(BatchRequestSchema, { calls: calls.map((c) => ({ call: c as never })) })).length;
        expect(calls.reduce((sum, c) => sum + bytesOf(c.value), 0)).toBeGreaterThanOrEqual(encoded);
        // The same calls as the gRPC fast path decodes them (a relay's), their keys left as bytes: counted as they are.
        const decoded = BATCH_CODECS.Batch!.decode(
          Buffer.from(toBinary(BatchRequestSchema, create(BatchRequestSchema, { calls: calls.map((c) => ({ call: c as never })) }))),
          1e9,
        );
        const values = (decoded as BatchRequest).calls.map((c) => c.call.value!);
        expect(values.reduce((sum, value) => sum + bytesOf(value as never), 0)).toBeGreaterThanOrEqual(encoded);
      }),
    );
  });
});
