import { describe, expect, it } from "vitest";
import { createMetadataClient } from "../../../src/client/index.js";
import { startTestServer } from "../../support/test-server.js";

/** post sends a JSON body and returns the parsed answer (undefined for 204). */
async function post(url: string, path: string, body: unknown): Promise<unknown> {
  const res = await fetch(`${url}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  expect(res.status).toBeLessThan(300);
  const text = await res.text();
  return text === "" ? undefined : JSON.parse(text);
}

/** settled waits until the server ran what it scheduled after the last call (background eviction steps and their commits). */
async function settled(): Promise<void> {
  for (let i = 0; i < 20; i++) await new Promise((resolve) => setImmediate(resolve));
}

describe("eviction through the server", () => {
  it("uses the prefix keys of gRPC and of vLLM's JSON: a full rank gives up a chain's tip, not its root", async () => {
    const server = await startTestServer({ evictHighWatermark: 1, evictLowWatermark: 1 });
    const client = createMetadataClient({ baseUrl: server.url, protocol: "grpc", httpVersion: "2", retry: { deadlineMs: 0 } });
    await client.initializeRank({ rank: 0, numPages: 4, worldSize: 1 });
    // A chain over gRPC (the fast path reads keys as bytes), extended over vLLM's JSON.
    const chain = await client.batchAllocate({ rank: 0, keys: ["a", "b"], prefixKeys: ["", "a"] });
    await client.confirmWrite({ rank: 0, keys: ["a", "b"], pages: chain.pages });
    const tail = (await post(server.url, "/keys/batch_allocate", { rank: 0, keys: [["c", "b"]] })) as { results: [string, number][] };
    await post(server.url, "/keys/confirm_write", { rank: 0, confirmations: tail.results, pages_to_release: [] });
    const other = await client.batchAllocate({ rank: 0, keys: ["x"] });
    await client.confirmWrite({ rank: 0, keys: ["x"], pages: other.pages });
    // Full: the next key takes the page of the oldest leaf, c, though a is the least recently used key.
    const next = await client.batchAllocate({ rank: 0, keys: ["y"], prefixKeys: [""] });
    expect(next.pages).toEqual([tail.results[0]![1]]);
    expect((await client.batchExists({ keys: ["a", "b", "c", "x"] })).exists).toEqual([true, true, false, true]);
    const [stats] = (await client.getStats({})).namespaces;
    expect(stats).toMatchObject({ evictions: 1n, leafEvictions: 1n, orphanEvictions: 0n, lruEvictions: 0n, inlineEvictions: 1n });
  });

  it("evicts in the background once a commit leaves a rank past the high watermark, down to the low one", async () => {
    const server = await startTestServer({ evictHighWatermark: 0.5, evictLowWatermark: 0.25 });
    const client = createMetadataClient({ baseUrl: server.url, protocol: "connect", httpVersion: "1.1", retry: { deadlineMs: 0 } });
    await client.initializeRank({ rank: 0, numPages: 8, worldSize: 1 });
    const keys = ["k0", "k1", "k2", "k3", "k4"];
    const { pages } = await client.batchAllocate({ rank: 0, keys, prefixKeys: ["", ...keys.slice(0, -1)] });
    await client.confirmWrite({ rank: 0, keys, pages });
    await settled();
    const [stats] = (await client.getStats({})).namespaces;
    expect(stats!.ranks[0]).toMatchObject({ usedPages: 2, freePages: 6 });
    expect(stats).toMatchObject({ evictions: 3n, leafEvictions: 3n, inlineEvictions: 0n });
    expect((await client.batchExists({ keys })).exists).toEqual([true, true, false, false, false]);
  });
});
