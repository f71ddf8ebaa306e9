import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { describe, expect, it } from "vitest";
import { MetadataService } from "../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { keyShard } from "../../src/core/index.js";
import { UNREACHED_HEADER } from "../../src/protocol/headers.js";
import { startChildRelay } from "../support/child-server.js";
import { lacking } from "../support/debian-packages.js";
import { startEtcdCluster } from "../support/etcd-cluster.js";
import { restartServer, type Server, startServer, waitForLeader } from "../support/ha-cluster.js";
import { until } from "../support/until.js";

const missing = lacking("the lookup misses tests", "etcd");

/** MEMBER_ARGS hold calls for 60 s while no leader is known (the default), and answer lookups as misses after 500 ms of it. */
const MEMBER_ARGS = ["--read-hold", "500ms", "--startup-hold", "60s"];

/** clients holds one gRPC client per member, made once: its HTTP/2 connection, opened before an outage, sits idle through it, as a scheduler's does. */
const clients = new Map<string, ReturnType<typeof createClient<typeof MetadataService>>>();
const grpc = (server: Server) => {
  const client = clients.get(server.url) ?? createClient(MetadataService, createGrpcTransport({ baseUrl: server.url }));
  clients.set(server.url, client);
  return client;
};

const post = (server: Server, path: string, body: unknown) =>
  fetch(`${server.url}${path}`, { method: "POST", body: JSON.stringify(body), signal: AbortSignal.timeout(20_000) });

/** lookups asks a member every lookup as the engines do (vLLM's and SGLang's JSON routes, gRPC), each within 20 s (a third of the hold), and returns the answers and their marks. */
async function lookups(member: Server) {
  const marks: (string | null)[] = [];
  const onHeader = (headers: Headers) => marks.push(headers.get(UNREACHED_HEADER));
  const vllm = await post(member, "/keys/batch_exists", { keys: ["written", "never"] });
  const located = await post(member, "/keys/get_locations", { rank: 0, keys: ["written"] });
  const sglang = await post(member, "/0/exists", { namespace: "sg", keys: ["x"] });
  const exists = await grpc(member).batchExists({ keys: ["written", "never"] }, { timeoutMs: 20_000, onHeader });
  const pages = await grpc(member).getLocations({ rank: 0, keys: ["written"] }, { timeoutMs: 20_000, onHeader });
  return {
    vllm: [vllm.status, await vllm.json(), vllm.headers.get(UNREACHED_HEADER)],
    located: [located.status, await located.json(), located.headers.get(UNREACHED_HEADER)],
    sglang: [sglang.status, await sglang.json(), sglang.headers.get(UNREACHED_HEADER)],
    grpc: [exists.exists, pages.pages, marks],
  };
}

describe.skipIf(missing !== "")("a cluster whose etcd is out of reach", () => {
  it("answers lookups as misses once its members have known no leader for --read-hold, on the old leader and through a standby, while writes wait; then answers them again", async () => {
    const etcd = await startEtcdCluster(1);
    const members = await Promise.all([0, 1].map(() => startServer(etcd, undefined, MEMBER_ARGS)));
    const leader = await waitForLeader(members);
    const standby = members.find((m) => m !== leader)!;
    await post(leader, "/rank/0/initialize", { num_pages: 8 });
    const { pages } = await grpc(leader).batchAllocate({ rank: 0, keys: ["written"] });
    await grpc(leader).confirmWrite({ rank: 0, keys: ["written"], pages });

    // Every member's connection opened now, then left idle while etcd goes.
    for (const member of members) await grpc(member).batchExists({ keys: ["written"] });
    await etcd.members[0]!.stop();
    await leader.process.logged("cluster: stopped leading");
    const misses = {
      vllm: [200, { exists: [false, false] }, "1"],
      located: [200, { locations: [null] }, "1"],
      sglang: [200, { exists: [false] }, "1"],
      grpc: [[false, false], [-1], ["1", "1"]],
    };
    // The old leader knows no leader; the standby still names it and passes its calls there: both answer misses, not waits of 60 s.
    expect(await lookups(leader)).toEqual(misses);
    expect(await lookups(standby)).toEqual(misses);
    // A relay that holds lookups itself (--read-hold 0) passes a member's misses on, marked.
    const relay = await startChildRelay(["--upstream", members.map((m) => m.url).join(","), "--read-hold", "0"]);
    const relayed = await fetch(`${relay.url}/keys/batch_exists`, {
      method: "POST",
      body: JSON.stringify({ keys: ["written"] }),
      signal: AbortSignal.timeout(20_000),
    });
    expect([relayed.status, await relayed.json(), relayed.headers.get(UNREACHED_HEADER)]).toEqual([200, { exists: [false] }, "1"]);
    await leader.process.logged("cluster: no leader known for --read-hold; lookups are answered as misses until one is");
    // A write is held meanwhile (--startup-hold): its own deadline ends it, and nothing is answered for it.
    const write = await grpc(standby)
      .batchAllocate({ rank: 0, keys: ["held"] }, { timeoutMs: 1_500 })
      .catch((e: unknown) => ConnectError.from(e));
    expect(write).toBeInstanceOf(ConnectError);
    expect((write as ConnectError).code).toBe(Code.DeadlineExceeded);
    const metrics = await (await fetch(`${leader.url}/metrics`)).text();
    expect(metrics).toMatch(/hf3fs_metadata_unreached_lookups_total\{method="batchExists"\} [1-9]/);
    expect(metrics).toMatch(/hf3fs_metadata_unreached_lookups_total\{method="getLocations"\} [1-9]/);

    // etcd back: a leader is elected, and lookups are the state's again, unmarked, wherever they are asked.
    await etcd.members[0]!.start();
    const next = await waitForLeader(members, 30_000);
    const answered = { vllm: [200, { exists: [true, false] }, null], located: [200, { locations: [pages[0]] }, null] };
    for (const member of [next, ...members.filter((m) => m !== next)]) expect(await lookups(member)).toMatchObject(answered);
  });
});

describe.skipIf(missing !== "")("a cluster of shards, one without a leader", () => {
  it("a member of the other shard answers that shard's part of a lookup as misses once it had no leader for --read-hold, its own part from its state, while writes to it wait", async () => {
    const etcd = await startEtcdCluster(1);
    const args = (shard: number) => [...MEMBER_ARGS, "--cluster-name", "split", "--shards", "2", "--shard", String(shard)];
    const members = await Promise.all([0, 1].map((shard) => startServer(etcd, undefined, args(shard))));
    await Promise.all(members.map((member) => waitForLeader([member])));
    const [own, gone] = members as [Server, Server];
    const keyOf = (shard: number) => Array.from({ length: 100 }, (_, i) => `key-${i}`).find((key) => keyShard("t", key, 2) === shard)!;
    const keys = [keyOf(0), keyOf(1)];
    const client = grpc(own);
    await client.initializeRank({ namespace: "t", rank: 0, numPages: 16, worldSize: 1 });
    const { pages } = await client.batchAllocate({ namespace: "t", rank: 0, keys });
    await client.confirmWrite({ namespace: "t", rank: 0, keys, pages });

    // Shard 1's one member stopped as operators stop it: its leader key goes with it.
    gone.process.child.kill("SIGTERM");
    await gone.process.exited;
    const marks: (string | null)[] = [];
    const onHeader = (headers: Headers) => marks.push(headers.get(UNREACHED_HEADER));
    const exists = await client.batchExists({ namespace: "t", keys }, { timeoutMs: 20_000, onHeader });
    const located = await client.getLocations({ namespace: "t", rank: 0, keys }, { timeoutMs: 20_000, onHeader });
    expect([exists.exists, located.pages, marks]).toEqual([
      [true, false],
      [pages[0], -1],
      ["1", "1"],
    ]);
    const write = await client.batchAllocate({ namespace: "t", rank: 0, keys: [keyOf(1)] }, { timeoutMs: 1_500 }).catch((e: unknown) => ConnectError.from(e));
    expect((write as ConnectError).code).toBe(Code.DeadlineExceeded);
    const metrics = await (await fetch(`${own.url}/metrics`)).text();
    expect(metrics).toMatch(/hf3fs_metadata_unreached_lookups_total\{method="batchExists"\} 1\n/);

    // Back on its data dir: once the member's next read of etcd finds its leader (every second), its keys are answered from its state again, unmarked.
    await restartServer(gone);
    await waitForLeader([gone]);
    let again: unknown[] = [];
    await until(async () => {
      marks.length = 0;
      again = [(await client.batchExists({ namespace: "t", keys }, { timeoutMs: 20_000, onHeader })).exists, [...marks]];
      return marks[0] === null;
    });
    expect(again).toEqual([[true, true], [null]]);
  });
});
