import { describe, expect, it } from "vitest";
import { createMetadataClient } from "../../src/client/index.js";
import { defaultRelayOptions, relayOptions } from "../../src/relay/relay-options.js";
import { lacking } from "../support/debian-packages.js";
import { startEtcdCluster } from "../support/etcd-cluster.js";
import { kill9, startServer, waitForLeader } from "../support/ha-cluster.js";
import { startTestRelay } from "../support/test-relay.js";
import { startTestServer } from "../support/test-server.js";

const missing = lacking("the relays in front of a cluster", "etcd");

/** post is a vLLM client's call: a JSON body to a route, its status and parsed body. */
async function post(url: string, path: string, body: unknown = {}) {
  const res = await fetch(`${url}${path}`, { method: "POST", body: JSON.stringify(body), headers: { "content-type": "application/json" } });
  const text = await res.text();
  return { status: res.status, body: text === "" ? undefined : (JSON.parse(text) as unknown) };
}

/** vllmWrites is what a vLLM worker does: initialize its rank, then allocate and confirm keys. */
async function vllmWrites(url: string, rank: number, numPages: number, keys: string[]) {
  expect((await post(url, `/rank/${rank}/initialize`, { num_pages: numPages })).status).toBe(200);
  const allocated = (await post(url, "/keys/batch_allocate", { rank, keys: keys.map((k) => [k, null]) })).body as { results: [string, number][] };
  expect((await post(url, "/keys/confirm_write", { rank, confirmations: allocated.results })).status).toBe(204);
  return allocated.results.map(([, page]) => page);
}

describe("one relay per model, each with its own namespace (--vllm-namespace)", () => {
  it("keeps two models' vLLM keys apart on one server, and each one's /clear and /reset to its own namespace", async () => {
    const server = await startTestServer();
    const llama = await startTestRelay(server.url, { vllmNamespace: "llama-3-8b" });
    const qwen = await startTestRelay(server.url, { vllmNamespace: "qwen-72b" });
    // Another model, another page count: without namespaces the second would resize the first's rank.
    expect(await vllmWrites(llama.url, 0, 8, ["a", "b"])).toEqual([0, 1]);
    expect(await vllmWrites(qwen.url, 0, 64, ["b", "c"])).toEqual([0, 1]);
    expect((await post(llama.url, "/keys/batch_exists", { keys: ["a", "b", "c"] })).body).toEqual({ exists: [true, true, false] });
    expect((await post(qwen.url, "/keys/batch_exists", { keys: ["a", "b", "c"] })).body).toEqual({ exists: [false, true, true] });
    const stats = await createMetadataClient({ baseUrl: server.url }).getStats({ allNamespaces: true });
    expect(stats.namespaces.map((ns) => [ns.namespace, ns.ranks[0]!.numPages, Number(ns.keys)])).toEqual([
      ["llama-3-8b", 8, 2],
      ["qwen-72b", 64, 2],
    ]);
    expect((await post(llama.url, "/clear", undefined)).status).toBe(204);
    expect((await post(llama.url, "/keys/batch_exists", { keys: ["a", "b"] })).body).toEqual({ exists: [false, false] });
    expect((await post(qwen.url, "/keys/batch_exists", { keys: ["b", "c"] })).body).toEqual({ exists: [true, true] });
    expect((await post(qwen.url, "/reset", { force: true })).body).toMatchObject({ namespaces: 1, ranks: 1 });
    expect((await post(llama.url, "/keys/batch_allocate", { rank: 0, keys: [["d", null]] })).status).toBe(200);
    expect((await post(qwen.url, "/keys/batch_allocate", { rank: 0, keys: [["d", null]] })).status).toBe(404);
  });

  it.skipIf(missing !== "")(
    "keeps them apart in front of a cluster too, through a failover",
    async () => {
      const etcd = await startEtcdCluster(1);
      const servers = await Promise.all([0, 1, 2].map(() => startServer(etcd)));
      const first = await waitForLeader(servers);
      const upstream = servers.map((s) => s.url).join(",");
      const llama = await startTestRelay(upstream, { vllmNamespace: "llama-3-8b" });
      const qwen = await startTestRelay(upstream, { vllmNamespace: "qwen-72b" });
      expect(await vllmWrites(llama.url, 0, 8, ["a"])).toEqual([0]);
      expect(await vllmWrites(qwen.url, 0, 64, ["a"])).toEqual([0]);
      await kill9(first);
      await waitForLeader(servers);
      expect(await vllmWrites(llama.url, 0, 8, ["b"])).toEqual([1]);
      expect((await post(qwen.url, "/keys/batch_exists", { keys: ["a", "b"] })).body).toEqual({ exists: [true, false] });
      const stats = await createMetadataClient({ baseUrl: upstream }).getStats({ allNamespaces: true });
      expect(stats.namespaces.map((ns) => [ns.namespace, ns.ranks[0]!.numPages, Number(ns.keys)])).toEqual([
        ["llama-3-8b", 8, 2],
        ["qwen-72b", 64, 1],
      ]);
    },
    60_000,
  );

  it("is the server's own vLLM routes' namespace with the same flag; a body that names a namespace keeps it", async () => {
    const server = await startTestServer({}, undefined, 0, { vllmNamespace: "m1" });
    await vllmWrites(server.url, 0, 8, ["a"]);
    expect((await post(server.url, "/rank/0/initialize", { namespace: "other", num_pages: 4 })).status).toBe(200);
    const stats = await createMetadataClient({ baseUrl: server.url }).getStats({ allNamespaces: true });
    expect(stats.namespaces.map((ns) => ns.namespace)).toEqual(["m1", "other"]);
  });

  it("refuses at start a namespace the server could not keep, naming the flag", () => {
    const options = { ...defaultRelayOptions, upstream: "http://127.0.0.1:1", vllmNamespace: "a\u001fb" };
    expect(() => relayOptions(options, (field) => `--${field}`)).toThrow(/--vllmNamespace: namespace must not hold U\+001F/);
  });
});
