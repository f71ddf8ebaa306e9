import { Code, type ConnectError } from "@connectrpc/connect";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { KeyScope } from "../../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { createMetadataClient } from "../../../src/client/index.js";
import { startTestServer } from "../../support/test-server.js";

/** sglang calls one of SGLang's routes (POST /{rank}/{route}) and returns the status and the parsed body. */
async function sglang(url: string, rank: number, route: string, body: Record<string, unknown> = {}) {
  const res = await fetch(`${url}/${rank}/${route}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  const text = await res.text();
  return { status: res.status, body: text === "" ? undefined : (JSON.parse(text) as Record<string, unknown>) };
}

/** put reserves and confirms `keys` on a rank over SGLang's routes, as its writer does, and returns their pages. */
async function put(url: string, rank: number, keys: string[], namespace = "kv"): Promise<number[]> {
  const { body } = await sglang(url, rank, "reserve_and_allocate_page_indices", { namespace, keys: keys.map((k) => [k, null]) });
  const pages = (body!.indices as [boolean, number][]).map(([, page]) => page);
  const confirmed = await sglang(url, rank, "confirm_write", {
    namespace,
    written_keys_to_confirm: keys.map((k, i) => [k, pages[i]]),
    pages_to_release: [],
  });
  expect(confirmed.status).toBe(204);
  return pages;
}

/** INLINE_EVICTION_ONLY turns eviction ahead of need off, as SGLang's server has none: a rank evicts only for a key that finds no free page. */
const INLINE_EVICTION_ONLY = { evictHighWatermark: 1, evictLowWatermark: 1 };

const exists = async (url: string, rank: number, keys: string[]) => (await sglang(url, rank, "exists", { keys })).body!.exists;

describe("the SGLang routes keep SGLang's per-rank semantics", () => {
  it("delete_keys on one rank leaves the key on the others", async () => {
    const { url } = await startTestServer();
    for (const rank of [0, 1]) await sglang(url, rank, "initialize", { num_pages: 8 });
    for (const rank of [0, 1]) await put(url, rank, ["a"]);
    expect((await sglang(url, 0, "delete_keys", { keys: ["a"] })).status).toBe(204);
    expect(await exists(url, 0, ["a"])).toEqual([false]);
    expect(await exists(url, 1, ["a"])).toEqual([true]);
  });

  it("clear of one rank empties that rank only", async () => {
    const { url } = await startTestServer();
    for (const rank of [0, 1]) await sglang(url, rank, "initialize", { num_pages: 8 });
    for (const rank of [0, 1]) await put(url, rank, ["a", "b"]);
    expect((await sglang(url, 0, "clear")).status).toBe(204);
    expect(await exists(url, 0, ["a", "b"])).toEqual([false, false]);
    expect(await exists(url, 1, ["a", "b"])).toEqual([true, true]);
    // The rank stays initialized: it takes new keys at once.
    expect(await put(url, 0, ["c"])).toHaveLength(1);
  });

  it("a full rank makes room for a new key from the keys it holds, though the other ranks never confirmed them", async () => {
    const { url } = await startTestServer(INLINE_EVICTION_ONLY);
    for (const rank of [0, 1]) await sglang(url, rank, "initialize", { num_pages: 4 });
    await put(url, 0, ["k0", "k1", "k2", "k3"]);
    const { body } = await sglang(url, 0, "reserve_and_allocate_page_indices", { keys: [["new", null]] });
    const [held, page] = (body!.indices as [boolean, number][])[0]!;
    expect(held).toBe(false);
    expect(page).toBeGreaterThanOrEqual(0);
    // The least recently used key went (k0: none was read since).
    expect(await exists(url, 0, ["k0", "k1", "k2", "k3"])).toEqual([false, true, true, true]);
  });

  it("a key confirmed on only some ranks stays past --incomplete-ttl", async () => {
    const { url, time } = await startTestServer({ incompleteTtlMs: 1_000 });
    for (const rank of [0, 1]) await sglang(url, rank, "initialize", { num_pages: 16 });
    const [page] = await put(url, 0, ["a"]);
    time.advance(60_000);
    expect(await exists(url, 0, ["a"])).toEqual([true]);
    expect((await sglang(url, 0, "get_page_indices", { keys: ["a"] })).body).toEqual({ indices: [page] });
    expect((await sglang(url, 1, "get_page_indices", { keys: ["a"] })).body).toEqual({ indices: [null] });
  });

  it("leave the vLLM routes' namespaces whole, and the vLLM routes refuse an SGLang namespace", async () => {
    const { url } = await startTestServer();
    const post = (path: string, body: unknown) => fetch(`${url}${path}`, { method: "POST", body: JSON.stringify(body) }).then((r) => r.json());
    await post("/rank/0/initialize", { num_pages: 4, namespace: "v" });
    await post("/rank/1/initialize", { num_pages: 4, namespace: "v" });
    // An SGLang rank joins a vLLM namespace with its scope: a key is complete once every rank confirmed it.
    expect((await sglang(url, 2, "initialize", { namespace: "v", num_pages: 4 })).status).toBe(204);
    await put(url, 0, ["a"], "v");
    expect(await post("/keys/batch_exists", { namespace: "v", keys: ["a"] })).toEqual({ exists: [false] });
    // vLLM's scheduler needs keys complete on every rank: it cannot use a namespace whose ranks keep their own.
    await sglang(url, 0, "initialize", { num_pages: 4, namespace: "s" });
    expect(await post("/rank/1/initialize", { num_pages: 4, namespace: "s" })).toMatchObject({ reason: "REASON_RANK_CONFIG_MISMATCH" });
  });
});

describe("the SGLang routes on a namespace of KEY_SCOPE_NAMESPACE", () => {
  it("keep its scope (a store from before key scopes, or a namespace made over gRPC): its keys span its ranks, as before", async () => {
    const { url } = await startTestServer();
    const client = createMetadataClient({ baseUrl: url });
    for (const rank of [0, 1]) await client.initializeRank({ rank, numPages: 8 });
    // SGLang's workers initialize again after a restart of the server: the stored namespace keeps its scope.
    for (const rank of [0, 1]) expect((await sglang(url, rank, "initialize", { num_pages: 8 })).status).toBe(204);
    for (const rank of [0, 1]) await put(url, rank, ["a"]);
    expect((await client.batchExists({ keys: ["a"] })).exists).toEqual([true]);
    expect((await sglang(url, 0, "delete_keys", { keys: ["a"] })).status).toBe(204);
    expect(await exists(url, 1, ["a"])).toEqual([false]);
    expect((await client.getStats({})).namespaces[0]!.keyScope).toBe(KeyScope.NAMESPACE);
  });
});

describe("a namespace of KEY_SCOPE_RANK over gRPC", () => {
  it("has the same semantics: DeleteKeys and Clear with a rank touch that rank, BatchExists without one asks every rank", async () => {
    const { url, time } = await startTestServer({ incompleteTtlMs: 1_000, ...INLINE_EVICTION_ONLY });
    const client = createMetadataClient({ baseUrl: url });
    const namespace = "sg";
    for (const rank of [0, 1, 2]) await client.initializeRank({ namespace, rank, numPages: 4, keyScope: KeyScope.RANK });
    const write = async (rank: number, keys: string[]) => {
      const { pages } = await client.batchAllocate({ namespace, rank, keys });
      await client.confirmWrite({ namespace, rank, keys, pages });
    };
    for (const rank of [0, 1, 2]) await write(rank, ["a", "b"]);
    expect((await client.batchExists({ namespace, keys: ["a", "b"] })).exists).toEqual([true, true]);
    expect((await client.deleteKeys({ namespace, keys: ["a"], rank: 0 })).deleted).toBe(1);
    expect((await client.batchExists({ namespace, keys: ["a"], rank: 1 })).exists).toEqual([true]);
    expect((await client.batchExists({ namespace, keys: ["a", "b"] })).exists).toEqual([false, true]);
    await client.clear({ namespace, rank: 1 });
    expect((await client.batchExists({ namespace, keys: ["b"], rank: 1 })).exists).toEqual([false]);
    expect((await client.batchExists({ namespace, keys: ["b"], rank: 2 })).exists).toEqual([true]);
    // Without a rank, DeleteKeys removes the key from every rank, and counts it once.
    expect((await client.deleteKeys({ namespace, keys: ["b", "b"] })).deleted).toBe(1);
    expect((await client.batchExists({ namespace, keys: ["b"], rank: 0 })).exists).toEqual([false]);
    // Rank 2 holds "a" (deleted on rank 0 only): four new keys fill its 4 pages, so "a", its least recently used, goes.
    await write(2, ["c", "d", "e", "f"]);
    time.advance(5_000); // past the incomplete TTL: a key of one rank is not incomplete
    expect((await client.batchExists({ namespace, keys: ["a", "c", "d", "e", "f"], rank: 2 })).exists).toEqual([false, true, true, true, true]);
    const stats = (await client.getStats({ namespace })).namespaces[0]!;
    expect(stats).toMatchObject({ namespace, keyScope: KeyScope.RANK, keys: 4n, completeKeys: 4n });
    expect(stats.ranks.map((r) => [r.rank, r.usedPages])).toEqual([
      [0, 0],
      [1, 0],
      [2, 4],
    ]);
  });

  it("refuses a rank where keys span the ranks, or where every namespace is cleared", async () => {
    const { url } = await startTestServer();
    const client = createMetadataClient({ baseUrl: url });
    await client.initializeRank({ rank: 0, numPages: 4 });
    const refusal = (call: Promise<unknown>) =>
      call.then(
        () => undefined,
        (e: ConnectError) => [e.code, e.rawMessage],
      );
    expect(await refusal(client.deleteKeys({ keys: ["a"], rank: 0 }))).toEqual([Code.InvalidArgument, expect.stringMatching(/takes no rank/)]);
    expect(await refusal(client.clear({ rank: 0 }))).toEqual([Code.InvalidArgument, expect.stringMatching(/takes no rank/)]);
    expect(await refusal(client.clear({ allNamespaces: true, rank: 0 }))).toEqual([Code.InvalidArgument, expect.stringMatching(/takes no rank/)]);
    expect(await refusal(client.initializeRank({ rank: 1, numPages: 4, keyScope: KeyScope.RANK }))).toEqual([
      Code.FailedPrecondition,
      expect.stringMatching(/key scope NAMESPACE/),
    ]);
    expect(await refusal(client.initializeRank({ namespace: "a\u001fb", rank: 0, numPages: 4 }))).toEqual([
      Code.InvalidArgument,
      expect.stringMatching(/U\+001F/),
    ]);
  });
});

/** RANKS and PAGES size the model test: enough pages that no rank fills (eviction's choice is this server's own). */
const RANKS = 3;
const PAGES = 64;
const KEY = fc.constantFrom("a", "b", "c", "d", "e", "f");
const RANK = fc.nat({ max: RANKS - 1 });
const call = fc.oneof(
  fc.record({ op: fc.constant("write" as const), rank: RANK, keys: fc.uniqueArray(KEY, { minLength: 1, maxLength: 3 }) }),
  fc.record({ op: fc.constant("reserve" as const), rank: RANK, keys: fc.uniqueArray(KEY, { minLength: 1, maxLength: 3 }) }),
  fc.record({ op: fc.constant("exists" as const), rank: RANK, keys: fc.array(KEY, { minLength: 1, maxLength: 4 }) }),
  fc.record({ op: fc.constant("locations" as const), rank: RANK, keys: fc.array(KEY, { minLength: 1, maxLength: 4 }) }),
  fc.record({ op: fc.constant("delete" as const), rank: RANK, keys: fc.array(KEY, { minLength: 1, maxLength: 3 }) }),
  fc.record({ op: fc.constant("clear" as const), rank: RANK }),
);

describe("the SGLang routes against a model of SGLang's per-rank server", () => {
  it("answer every call of a random mix as the model does", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(call, { minLength: 1, maxLength: 40 }), async (calls) => {
        const { url, close } = await startTestServer();
        try {
          for (let rank = 0; rank < RANKS; rank++) await sglang(url, rank, "initialize", { num_pages: PAGES });
          // The model: per rank, each confirmed key's page; SGLang keeps nothing else a caller can see.
          const model = Array.from({ length: RANKS }, () => new Map<string, number>());
          for (const c of calls) {
            const held = model[c.rank]!;
            if (c.op === "write" || c.op === "reserve") {
              const { body } = await sglang(url, c.rank, "reserve_and_allocate_page_indices", { keys: c.keys.map((k) => [k, null]) });
              const indices = body!.indices as [boolean, number][];
              const used = new Set(held.values());
              for (const [i, key] of c.keys.entries()) {
                const [exists, page] = indices[i]!;
                expect(exists).toBe(held.has(key));
                if (held.has(key)) expect(page).toBe(held.get(key));
                else expect(used.has(page)).toBe(false); // a new key never gets a page a key of this rank holds
              }
              if (c.op === "reserve") continue; // reserved, never confirmed: nothing a reader sees
              const fresh = c.keys.filter((k) => !held.has(k));
              const pages = fresh.map((k) => indices[c.keys.indexOf(k)]![1]);
              await sglang(url, c.rank, "confirm_write", { written_keys_to_confirm: fresh.map((k, i) => [k, pages[i]]), pages_to_release: [] });
              for (const [i, key] of fresh.entries()) held.set(key, pages[i]!);
            } else if (c.op === "exists") {
              expect(await exists(url, c.rank, c.keys)).toEqual(c.keys.map((k) => held.has(k)));
            } else if (c.op === "locations") {
              const { body } = await sglang(url, c.rank, "get_page_indices", { keys: c.keys });
              expect(body!.indices).toEqual(c.keys.map((k) => held.get(k) ?? null));
            } else if (c.op === "delete") {
              expect((await sglang(url, c.rank, "delete_keys", { keys: c.keys })).status).toBe(204);
              for (const key of c.keys) held.delete(key);
            } else {
              expect((await sglang(url, c.rank, "clear")).status).toBe(204);
              held.clear();
            }
          }
        } finally {
          await close();
        }
      }),
      { numRuns: 40 },
    );
  });
});

describe("SGLang's per-rank view in the contract (what the SGLang routes send, and a relay forwards)", () => {
  it("new_key_scope scopes a new namespace only; caller_rank must be initialized and acts as SGLang's routes do", async () => {
    const { url } = await startTestServer();
    const client = createMetadataClient({ baseUrl: url });
    // new_key_scope gives a new namespace its scope; an existing one keeps its own, with no mismatch.
    await client.initializeRank({ namespace: "r", rank: 0, numPages: 4, newKeyScope: KeyScope.RANK });
    await client.initializeRank({ namespace: "n", rank: 0, numPages: 4, keyScope: KeyScope.NAMESPACE });
    await client.initializeRank({ namespace: "n", rank: 1, numPages: 4, newKeyScope: KeyScope.RANK });
    for (const [ns, scope] of [
      ["r", KeyScope.RANK],
      ["n", KeyScope.NAMESPACE],
    ] as const) {
      expect((await client.getStats({ namespace: ns })).namespaces[0]!.keyScope).toBe(scope);
    }
    for (const rank of [0, 1]) {
      if (rank === 1) await client.initializeRank({ namespace: "r", rank, numPages: 4 });
      for (const ns of ["r", "n"]) {
        const { pages } = await client.batchAllocate({ namespace: ns, rank, keys: ["a"] });
        await client.confirmWrite({ namespace: ns, rank, keys: ["a"], pages });
      }
    }
    // A rank that is not initialized: RANK_NOT_INITIALIZED, where rank answers all false.
    expect((await client.batchExists({ namespace: "r", keys: ["a"], rank: 7 })).exists).toEqual([false]);
    for (const call of [
      () => client.batchExists({ namespace: "r", keys: ["a"], callerRank: 7 }),
      () => client.deleteKeys({ namespace: "r", keys: ["a"], callerRank: 7 }),
      () => client.clear({ namespace: "r", callerRank: 7 }),
    ]) {
      await expect(call()).rejects.toMatchObject({ code: Code.FailedPrecondition });
    }
    // With both rank and caller_rank, or caller_rank on every namespace: INVALID_ARGUMENT.
    await expect(client.batchExists({ namespace: "r", keys: ["a"], rank: 0, callerRank: 0 })).rejects.toMatchObject({ code: Code.InvalidArgument });
    await expect(client.clear({ allNamespaces: true, callerRank: 0 })).rejects.toMatchObject({ code: Code.InvalidArgument });
    // caller_rank deletes from that rank in KEY_SCOPE_RANK, from every rank in KEY_SCOPE_NAMESPACE.
    expect((await client.deleteKeys({ namespace: "r", keys: ["a"], callerRank: 0 })).deleted).toBe(1);
    expect((await client.batchExists({ namespace: "r", keys: ["a"], callerRank: 0 })).exists).toEqual([false]);
    expect((await client.batchExists({ namespace: "r", keys: ["a"], callerRank: 1 })).exists).toEqual([true]);
    expect((await client.deleteKeys({ namespace: "n", keys: ["a"], callerRank: 0 })).deleted).toBe(1);
    expect((await client.batchExists({ namespace: "n", keys: ["a"], rank: 1 })).exists).toEqual([false]);
    await client.clear({ namespace: "r", callerRank: 1 });
    expect((await client.batchExists({ namespace: "r", keys: ["a"], callerRank: 1 })).exists).toEqual([false]);
  });
});
