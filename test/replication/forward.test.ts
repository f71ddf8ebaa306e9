import { createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { afterEach, describe, expect, it } from "vitest";
import { MetadataService } from "../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { SERVER_ID_HEADER } from "../../src/protocol/headers.js";
import { startChildRelay } from "../support/child-server.js";
import { lacking } from "../support/debian-packages.js";
import { engines } from "../support/engine-clients.js";
import { startEtcdCluster } from "../support/etcd-cluster.js";
import { kill9, type Server, serving, startServer, waitForLeader } from "../support/ha-cluster.js";

const missing = lacking("the standby forwarding tests", "etcd", "requests");

/** untilForwarding waits until a standby has read the leader key (it names a leader to forward to), polling a harmless call. */
async function untilForwarding(standby: Server): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline) {
    const res = await fetch(`${standby.url}/keys/batch_exists`, { method: "POST", body: JSON.stringify({ namespace: "probe", keys: ["k"] }) });
    if (res.status === 200) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error("the standby never forwarded a call");
}

describe.skipIf(missing !== "")("high availability on etcd: standbys forward calls to the leader (--standby-calls forward, the default)", () => {
  let servers: Server[] = [];
  afterEach(() => {
    servers = [];
  });

  it("through a relay given the standby alone: its lookups are the leader's answers, after an idle spell past --read-hold too", async () => {
    const etcd = await startEtcdCluster(1);
    servers = await Promise.all([startServer(etcd, undefined, ["--standby-read-lag", "0"]), startServer(etcd, undefined, ["--standby-read-lag", "0"])]);
    const leader = await waitForLeader(servers);
    const standby = servers.find((s) => s !== leader)!;
    await untilForwarding(standby);
    // The relay's watch of the standby says it does not lead; the calls it forwards say a server answers.
    const relay = await startChildRelay(["--upstream", standby.url, "--read-hold", "300ms"]);
    const post = (path: string, body: unknown) => fetch(`${relay.url}${path}`, { method: "POST", body: JSON.stringify(body) });
    expect((await post("/rank/0/initialize", { num_pages: 8 })).status).toBe(200);
    const { results } = (await (await post("/keys/batch_allocate", { rank: 0, keys: [["a", null]] })).json()) as { results: [string, number][] };
    expect((await post("/keys/confirm_write", { rank: 0, confirmations: [["a", results[0]![1]]] })).status).toBe(204);
    for (const idleMs of [0, 600]) {
      await new Promise((resolve) => setTimeout(resolve, idleMs));
      const res = await post("/keys/batch_exists", { keys: ["a", "b"] });
      expect([idleMs, await res.json(), res.headers.get("hf3fs-unreached")]).toEqual([idleMs, { exists: [true, false] }, null]);
    }
  });

  it("in every framing, with the leader's answers, while the standby keeps answering health itself", async () => {
    const etcd = await startEtcdCluster(1);
    servers = await Promise.all([startServer(etcd), startServer(etcd)]);
    const leader = await waitForLeader(servers);
    const standby = servers.find((s) => s !== leader)!;
    await untilForwarding(standby);
    // vLLM's JSON: answered, no redirect.
    const json = (path: string, body: unknown) =>
      fetch(`${standby.url}${path}`, { method: "POST", body: JSON.stringify(body), redirect: "manual" }).then(async (r) => ({
        status: r.status,
        body: await r.json(),
        serverId: r.headers.get(SERVER_ID_HEADER),
      }));
    expect(await json("/rank/0/initialize", { num_pages: 16 })).toMatchObject({ status: 200, body: { message: "rank 0 initialized with 16 pages" } });
    expect(await json("/keys/batch_allocate", { rank: 0, keys: [["k", ""]] })).toMatchObject({ status: 200, body: { rank: 0, results: [["k", 0]] } });
    expect((await fetch(`${standby.url}/keys/confirm_write`, { method: "POST", body: JSON.stringify({ rank: 0, confirmations: [["k", 0]] }) })).status).toBe(
      204,
    );
    // An error is the leader's too: status, reason and body.
    expect(await json("/keys/batch_allocate", { rank: 7, keys: [["k", ""]] })).toMatchObject({ status: 404, body: { reason: "REASON_RANK_NOT_INITIALIZED" } });
    // gRPC (the fast path's framing), Connect and gRPC-Web, each straight to the standby with no client of its own routing.
    for (const transport of [createGrpcTransport, createConnectTransport, createGrpcWebTransport]) {
      const client = createClient(MetadataService, transport({ baseUrl: standby.url, httpVersion: transport === createGrpcTransport ? "2" : "1.1" }));
      expect((await client.getLocations({ rank: 0, keys: ["k", "none"] })).pages).toEqual([0, -1]);
      await expect(client.confirmWrite({ rank: 0, keys: ["other"], pages: [0] })).rejects.toThrow(/RESERVATION_NOT_FOUND|no reservation/);
    }
    // A call another member forwarded is answered here, never passed on again (no call goes round between stale members),
    // and never redirected either (the leader it would name may be gone by the time the client gets there): 503, to send again.
    const again = await fetch(`${standby.url}/rank/0/initialize`, {
      method: "POST",
      headers: { "hf3fs-forwarded-by": "http://another-member:18000" },
      body: JSON.stringify({ num_pages: 16 }),
      redirect: "manual",
    });
    expect([again.status, again.headers.get("location")]).toEqual([503, null]);
    expect(await again.json()).toMatchObject({ reason: "REASON_NOT_LEADER" });
    // Health is each member's own: the standby does not serve MetadataService, whatever it forwards.
    expect(await serving(standby, "")).toBe(true);
    expect(await serving(standby, MetadataService.typeName)).toBe(false);
  }, 60_000);

  for (const [engineName, start] of engines(1)) {
    it(`kill -9 of the leader, not restarted, then of the next: ${engineName} given one standby (SGLang's metadata_server_url) sees no error and loses nothing`, async () => {
      const etcd = await startEtcdCluster(3);
      servers = await Promise.all([0, 1, 2].map(() => startServer(etcd)));
      const first = await waitForLeader(servers);
      const member = servers.find((s) => s !== first)!;
      await untilForwarding(member);
      const engine = await start(member.url);
      await engine.progress(5);
      let killed = 0;
      for (let round = 0; round < 2; round++) {
        const leader = await waitForLeader(servers);
        if (leader === member) break; // the member the engine knows leads now: it serves the calls itself
        await kill9(leader);
        killed++;
        await engine.progress(5);
      }
      const run = await engine.stop();
      console.log(
        `${engineName} given one standby across ${killed} leaders killed for good: ${run.calls} calls (the longest ${run.longestCall}), ${run.stored} keys stored`,
      );
      expect(killed).toBeGreaterThanOrEqual(1);
      expect(run.errors).toEqual([]);
      expect(await run.missing(member.url)).toEqual([]);
    }, 120_000);
  }
});
