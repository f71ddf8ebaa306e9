import { Code, type ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { ErrorInfoSchema, KeyScope, Reason } from "../../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { createMetadataClient } from "../../../src/client/index.js";
import { startTestServer } from "../../support/test-server.js";

/** post calls a JSON route and returns its status and parsed body. */
async function post(url: string, path: string, body: unknown) {
  const res = await fetch(`${url}${path}`, { method: "POST", body: JSON.stringify(body) });
  const text = await res.text();
  return { status: res.status, body: text === "" ? undefined : (JSON.parse(text) as Record<string, unknown>) };
}

describe("ResetNamespace: a namespace defined anew", () => {
  it("lets vLLM's worker in after the namespace was defined otherwise, where Clear does not; the mismatch says how", async () => {
    const server = await startTestServer();
    const client = createMetadataClient({ baseUrl: server.url });
    await client.initializeRank({ rank: 0, numPages: 8, worldSize: 1 }); // as the example of docs/calling.md does
    const { pages } = await client.batchAllocate({ rank: 0, keys: ["a"] });
    await client.confirmWrite({ rank: 0, keys: ["a"], pages });
    const locked = await post(server.url, "/rank/0/initialize", { num_pages: 1024 });
    expect(locked.status).toBe(409);
    expect(locked.body).toMatchObject({ reason: "REASON_RANK_CONFIG_MISMATCH" });
    expect(locked.body!.detail).toContain('hf3fs-metadata reset --namespace "kv"');
    await client.clear({ allNamespaces: true });
    expect((await post(server.url, "/rank/0/initialize", { num_pages: 1024 })).status).toBe(409); // Clear keeps the ranks
    server.time.advance(60_000); // the engines stopped a minute ago
    expect(await client.resetNamespace({ namespace: "kv" })).toMatchObject({ namespaces: 1, ranks: 1, forgottenKeys: 0 });
    expect(await post(server.url, "/rank/0/initialize", { num_pages: 1024 })).toEqual({ status: 200, body: { message: "rank 0 initialized with 1024 pages" } });
    // A repeat, or an unknown namespace, forgets nothing and succeeds.
    await client.resetNamespace({ namespace: "nope" });
    expect(await client.resetNamespace({ namespace: "nope" })).toMatchObject({ namespaces: 0, ranks: 0, forgottenKeys: 0 });
  });

  it("forgets keys, reservations and the key scope; refuses while read leases or reservations live unless forced, and then waits out nothing", async () => {
    const server = await startTestServer({ readLeaseTtlMs: 70_000, reservationTtlMs: 1_000_000 });
    const client = createMetadataClient({ baseUrl: server.url });
    for (const rank of [0, 1]) await client.initializeRank({ namespace: "m", rank, numPages: 4, newKeyScope: KeyScope.RANK });
    const { pages } = await client.batchAllocate({ namespace: "m", rank: 0, keys: ["a", "b"] });
    await client.confirmWrite({ namespace: "m", rank: 0, keys: ["a"], pages: [pages[0]!] }); // "b" stays reserved
    expect((await client.getLocations({ namespace: "m", rank: 0, keys: ["a"], includeIncomplete: true })).pages).toEqual([pages[0]]);
    server.time.advance(60_000); // no call for a minute: the namespace is not in use, its lease lives on
    const refused = (await client.resetNamespace({ namespace: "m" }).catch((e: ConnectError) => e)) as ConnectError;
    expect(refused.code).toBe(Code.FailedPrecondition);
    expect(refused.findDetails(ErrorInfoSchema)[0]?.reason).toBe(Reason.READ_LEASED);
    expect((await post(server.url, "/reset", { namespace: "m" })).body).toMatchObject({ reason: "REASON_READ_LEASED" });
    expect((await client.getStats({ namespace: "m" })).namespaces[0]!.keyScope).toBe(KeyScope.RANK); // nothing changed
    server.time.advance(10_001); // the lease ends (70 s); "b" is still reserved: a writer may be writing its page
    const writing = await post(server.url, "/reset", { namespace: "m" });
    expect(writing).toMatchObject({ status: 409, body: { reason: "REASON_WRITES_IN_FLIGHT" } });
    expect(writing.body!.detail).toContain('namespace "m" has writes in flight: 1 reserved page(s) on rank 0');
    expect(await post(server.url, "/reset", { namespace: "m", force: true })).toEqual({ status: 200, body: { namespaces: 1, ranks: 2, forgotten_keys: 1 } });
    expect((await client.getStats({ namespace: "m" })).namespaces).toEqual([]);
    // Defined anew, with another scope and world size.
    await client.initializeRank({ namespace: "m", rank: 0, numPages: 2, worldSize: 1, keyScope: KeyScope.NAMESPACE });
    expect((await client.getStats({ namespace: "m" })).namespaces[0]).toMatchObject({ keyScope: KeyScope.NAMESPACE, worldSize: 1 });
    // force forgets a leased namespace at once.
    const again = await client.batchAllocate({ namespace: "m", rank: 0, keys: ["c"] });
    await client.confirmWrite({ namespace: "m", rank: 0, keys: ["c"], pages: again.pages });
    await client.getLocations({ namespace: "m", rank: 0, keys: ["c"] });
    await expect(client.resetNamespace({ namespace: "m" })).rejects.toMatchObject({ code: Code.FailedPrecondition });
    expect(await client.resetNamespace({ namespace: "m", force: true })).toMatchObject({ namespaces: 1, ranks: 1, forgottenKeys: 1 });
  });

  it("never hands a page a writer still holds to another key: without force it refuses while the page is reserved, naming namespace and rank", async () => {
    const server = await startTestServer({ reservationTtlMs: 120_000 });
    const writerA = createMetadataClient({ baseUrl: server.url });
    await writerA.initializeRank({ namespace: "kv", rank: 0, numPages: 4, worldSize: 1 });
    const { pages } = await writerA.batchAllocate({ namespace: "kv", rank: 0, keys: ["a"] }); // A writes page 0 now
    server.time.advance(60_000); // A writes for a minute: no call meanwhile, the page still reserved
    const refused = (await writerA.resetNamespace({ namespace: "kv" }).catch((e: ConnectError) => e)) as ConnectError;
    expect(refused.code).toBe(Code.FailedPrecondition);
    expect(refused.findDetails(ErrorInfoSchema)[0]).toMatchObject({ reason: Reason.WRITES_IN_FLIGHT, namespace: "kv", rank: 0 });
    await writerA.confirmWrite({ namespace: "kv", rank: 0, keys: ["a"], pages }); // A's write lands where it was told
    server.time.advance(60_000);
    expect(await writerA.resetNamespace({ namespace: "kv" })).toMatchObject({ namespaces: 1, ranks: 1, forgottenKeys: 1 });
  });

  it("with all_namespaces forgets every namespace", async () => {
    const server = await startTestServer();
    const client = createMetadataClient({ baseUrl: server.url });
    for (const namespace of ["a", "b"]) await client.initializeRank({ namespace, rank: 0, numPages: 4 });
    await client.initializeRank({ namespace: "s", rank: 3, numPages: 4, newKeyScope: KeyScope.RANK });
    server.time.advance(60_000);
    expect(await client.resetNamespace({ allNamespaces: true })).toMatchObject({ namespaces: 3, ranks: 3 });
    expect((await client.getStats({ allNamespaces: true })).namespaces).toEqual([]);
  });
});

describe("ResetNamespace with validate_only", () => {
  it("is refused as the reset would be, or counts what it would forget, and forgets nothing", async () => {
    const server = await startTestServer({ reservationTtlMs: 120_000 });
    const client = createMetadataClient({ baseUrl: server.url });
    for (const rank of [0, 1]) await client.initializeRank({ namespace: "m", rank, numPages: 4 });
    const { pages } = await client.batchAllocate({ namespace: "m", rank: 0, keys: ["a", "b"] });
    await client.confirmWrite({ namespace: "m", rank: 0, keys: ["a"], pages: [pages[0]!] }); // "b" stays reserved
    server.time.advance(60_000);
    await expect(client.resetNamespace({ namespace: "m", validateOnly: true })).rejects.toMatchObject({ code: Code.FailedPrecondition });
    await client.confirmWrite({ namespace: "m", rank: 0, keys: ["b"], pages: [pages[1]!] });
    server.time.advance(60_000);
    expect(await client.resetNamespace({ namespace: "m", validateOnly: true })).toMatchObject({ namespaces: 1, ranks: 2, forgottenKeys: 2 });
    expect(Number((await client.getStats({ namespace: "m" })).namespaces[0]!.keys)).toBe(2); // nothing forgotten
    expect(await client.resetNamespace({ namespace: "m" })).toMatchObject({ namespaces: 1, ranks: 2, forgottenKeys: 2 });
  });
});

describe("ResetNamespace of a namespace in use", () => {
  it("refuses while its engines called in the last minute, saying what a reset would do to them and offering Clear; force resets", async () => {
    const server = await startTestServer();
    const client = createMetadataClient({ baseUrl: server.url });
    await post(server.url, "/rank/0/initialize", { num_pages: 8 }); // vLLM's worker
    server.time.advance(30_000);
    expect((await post(server.url, "/keys/batch_exists", { keys: ["a"] })).status).toBe(200); // its scheduler, 30 s later
    server.time.advance(59_000);
    const refused = (await client.resetNamespace({ namespace: "kv" }).catch((e: ConnectError) => e)) as ConnectError;
    expect(refused.code).toBe(Code.FailedPrecondition);
    expect(refused.findDetails(ErrorInfoSchema)[0]).toMatchObject({ reason: Reason.NAMESPACE_IN_USE, namespace: "kv" });
    expect(refused.rawMessage).toMatch(/had a call 59\.0 s ago.*never initializes again.*hf3fs-metadata clear --namespace "kv"/);
    expect((await post(server.url, "/reset", {})).body).toMatchObject({ reason: "REASON_NAMESPACE_IN_USE" });
    // Stats, a Clear and refused resets are no engine's calls: a minute after the scheduler's, a reset goes through.
    await client.getStats({ namespace: "kv" });
    await client.clear({ namespace: "kv" });
    server.time.advance(1_000);
    expect(await client.resetNamespace({ namespace: "kv" })).toMatchObject({ namespaces: 1, ranks: 1 });
    await post(server.url, "/rank/0/initialize", { num_pages: 8 });
    expect(await client.resetNamespace({ namespace: "kv", force: true })).toMatchObject({ namespaces: 1, ranks: 1 });
    expect(await post(server.url, "/keys/batch_allocate", { rank: 0, keys: [["a", null]] })).toMatchObject({ status: 404 });
  });
});

describe("InitializeRank's layout", () => {
  it("is kept per namespace: another layout is a mismatch, so another model never reads these pages; none given checks nothing", async () => {
    const server = await startTestServer();
    const client = createMetadataClient({ baseUrl: server.url });
    const layout = "qwen3-14b bf16 page=2MiB tp=2";
    await client.initializeRank({ namespace: "m", rank: 0, numPages: 4, worldSize: 2, layout });
    await client.initializeRank({ namespace: "m", rank: 1, numPages: 4, worldSize: 2, layout });
    await client.initializeRank({ namespace: "m", rank: 1, numPages: 4, worldSize: 2 }); // vLLM's own client sends none
    const refused = (await client
      .initializeRank({ namespace: "m", rank: 1, numPages: 4, worldSize: 2, layout: "qwen3-14b fp8 page=1MiB tp=2" })
      .catch((e: ConnectError) => e)) as ConnectError;
    expect(refused.code).toBe(Code.FailedPrecondition);
    expect(refused.findDetails(ErrorInfoSchema)[0]).toMatchObject({ reason: Reason.RANK_CONFIG_MISMATCH, field: "layout" });
    expect(refused.rawMessage).toContain("another model's");
    expect((await client.getStats({ namespace: "m" })).namespaces[0]!.layout).toBe(layout);
    // Over the JSON routes of both dialects too.
    expect(await post(server.url, "/rank/0/initialize", { namespace: "m", num_pages: 4, world_size: 2, layout: "other" })).toMatchObject({
      status: 409,
      body: { reason: "REASON_RANK_CONFIG_MISMATCH" },
    });
    expect((await post(server.url, "/0/initialize", { namespace: "s", num_pages: 4, layout: "a" })).status).toBe(204);
    expect((await post(server.url, "/1/initialize", { namespace: "s", num_pages: 4, layout: "b" })).status).toBe(409);
    // A namespace made without a layout has none: a layout given later does not match it.
    await client.initializeRank({ namespace: "old", rank: 0, numPages: 4 });
    await expect(client.initializeRank({ namespace: "old", rank: 0, numPages: 4, layout: "x" })).rejects.toMatchObject({ code: Code.FailedPrecondition });
    // A reset lets a new layout in.
    server.time.advance(60_000);
    await client.resetNamespace({ namespace: "m" });
    await client.initializeRank({ namespace: "m", rank: 0, numPages: 4, worldSize: 2, layout: "qwen3-14b fp8 page=1MiB tp=2" });
  });
});
