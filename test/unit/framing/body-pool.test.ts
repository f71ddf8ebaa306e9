import { createClient } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { MetadataService } from "../../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { createLeanGrpcTransport } from "../../../src/client/lean-grpc-transport.js";
import { BodyPool } from "../../../src/framing/http/body-pool.js";
import { KeyBytesMessage } from "../../../src/service/key-bytes.js";
import { startTestServer } from "../../support/test-server.js";

const chunksOf = (bytes: Buffer, size: number) => Array.from({ length: Math.ceil(bytes.length / size) }, (_, i) => bytes.subarray(i * size, (i + 1) * size));

describe("BodyPool", () => {
  it("joins chunks into a buffer of the next power of two, and hands a returned buffer to the next body of its size", () => {
    const pool = new BodyPool();
    const body = Buffer.from(Array.from({ length: 40_000 }, (_, i) => i % 251));
    const first = pool.join(chunksOf(body, 16_384), body.length)!;
    expect(first.body.equals(body)).toBe(true);
    expect(first.backing.length).toBe(65_536);
    pool.give(first.backing);
    const other = Buffer.alloc(33_000, 7);
    const second = pool.join(chunksOf(other, 16_384), other.length)!;
    expect(second.backing).toBe(first.backing); // reused, and rewritten
    expect(second.body.equals(other)).toBe(true);
    // A buffer in use is not handed out twice.
    expect(pool.join(chunksOf(other, 16_384), other.length)!.backing).not.toBe(second.backing);
  });

  it("pools neither bodies over 4 MiB nor more than its bound of unused bytes", () => {
    expect(new BodyPool().join([Buffer.alloc(3 << 20), Buffer.alloc(2 << 20)], 5 << 20)).toBeUndefined();
    const pool = new BodyPool(100_000);
    const a = pool.join([Buffer.alloc(20_000), Buffer.alloc(20_000)], 40_000)!;
    const b = pool.join([Buffer.alloc(20_000), Buffer.alloc(20_000)], 40_000)!;
    pool.give(a.backing);
    pool.give(b.backing); // 131,072 unused bytes would pass the bound: left to the collector
    expect(pool.join([Buffer.alloc(40_000)], 40_000)!.backing).toBe(a.backing);
    expect(pool.join([Buffer.alloc(40_000)], 40_000)!.backing).not.toBe(b.backing);
  });

  it("makes a released message refuse to read its key bytes", () => {
    const message = new KeyBytesMessage(Buffer.from("abc"));
    message.addKey("keys", 0, 3);
    const keys = message.keys;
    message.release();
    expect(() => message.keyLists).toThrow(/after its call ended/);
    expect(keys).toEqual(["abc"]); // what was made a string before stays
  });
});

describe("pooled request bodies", () => {
  it("join many-chunk bodies byte for byte: concurrent calls of about 30 KB each get their own keys' answers", async () => {
    const server = await startTestServer({}, undefined, 0, { maxBodyBytes: 1 << 22 });
    // Plain gRPC, uncompressed: the fast path, whose bodies are pooled.
    const transport = createLeanGrpcTransport({ baseUrl: server.url });
    const client = createClient(MetadataService, transport);
    const namespace = "pool";
    await client.initializeRank({ namespace, rank: 0, numPages: 50_000 });
    // 24 writers, each 300 keys of 96 bytes per call (about 30 KB: several HTTP/2 DATA frames), 6 rounds.
    const writer = async (w: number) => {
      for (let round = 0; round < 6; round++) {
        const keys = Array.from({ length: 300 }, (_, i) => `${w}.${round}.${i}.`.padEnd(96, String.fromCharCode(97 + ((w + i) % 26))));
        const { pages } = await client.batchAllocate({ namespace, rank: 0, keys });
        expect(pages.every((p) => p >= 0)).toBe(true);
        expect((await client.confirmWrite({ namespace, rank: 0, keys, pages })).confirmed).toBe(keys.length);
        expect((await client.batchExists({ namespace, keys })).exists.every(Boolean)).toBe(true);
        expect((await client.getLocations({ namespace, rank: 0, keys })).pages).toEqual(pages);
      }
    };
    await Promise.all(Array.from({ length: 24 }, (_, w) => writer(w)));
    transport.close();
    expect(server.state.stats(namespace)[0]!.ranks[0]!.usedPages).toBe(24 * 6 * 300);
  }, 60_000);

  it("keep a held call's bytes while other bodies arrive: concurrent calls over 1 MiB wait for their turns between decode and core", async () => {
    const server = await startTestServer({ maxKeysPerCall: 20_000 }, undefined, 0, {
      maxBodyBytes: 1 << 22,
      maxBufferedBytesPerConnection: 1 << 24,
      maxBufferedBytes: 1 << 24,
    });
    const transport = createLeanGrpcTransport({ baseUrl: server.url });
    const client = createClient(MetadataService, transport);
    const namespace = "large";
    await client.initializeRank({ namespace, rank: 0, numPages: 50_000 });
    // 4 calls of 11,000 keys of 96 bytes (about 1.1 MB each): the large-call lane runs their steps in turns, so each
    // body is decoded, then waits while the next ones are read and joined, then reaches the core.
    const sets = Array.from({ length: 4 }, (_, w) => Array.from({ length: 11_000 }, (_, i) => `${w}:${i}:`.padEnd(96, String.fromCharCode(97 + w))));
    const allocated = await Promise.all(sets.map((keys) => client.batchAllocate({ namespace, rank: 0, keys })));
    for (const [w, keys] of sets.entries()) {
      const { pages } = allocated[w]!;
      expect(new Set(pages).size).toBe(keys.length);
      await client.confirmWrite({ namespace, rank: 0, keys, pages });
      expect((await client.getLocations({ namespace, rank: 0, keys })).pages).toEqual(pages);
    }
    expect(server.state.stats(namespace)[0]!.ranks[0]!.usedPages).toBe(44_000);
    transport.close();
  }, 60_000);
});
