import { once } from "node:events";
import * as http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { describe, expect, it } from "vitest";
import { Health, HealthCheckResponse_ServingStatus as ServingStatus } from "../../gen/grpc/health/v1/health_pb.js";
import { MetadataService } from "../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { Leadership } from "../../src/service/leadership.js";
import { startChildServer } from "../support/child-server.js";
import { stallableLeader } from "../support/stallable-leader.js";
import { startTestRelay } from "../support/test-relay.js";
import { startTestServer } from "../support/test-server.js";
import { until } from "../support/until.js";

/** CountingProxy passes every HTTP/2 stream on to `target` and counts them by path: what a relay asks of a server. */
async function countingProxy(target: string): Promise<{ url: string; paths: string[]; close(): void }> {
  const upstream = http2.connect(target);
  upstream.on("error", () => undefined);
  const paths: string[] = [];
  const proxy = http2.createServer();
  proxy.on("stream", (stream, headers) => {
    paths.push(String(headers[":path"]));
    const { ":path": path, ":method": method } = headers;
    const sent = Object.fromEntries(Object.entries(headers).filter(([name]) => !name.startsWith(":")));
    const out = upstream.request({ ...sent, ":path": path, ":method": method });
    let trailers: http2.IncomingHttpHeaders = {};
    out.on("response", (head) => stream.respond(head, { waitForTrailers: true }));
    out.on("trailers", (t) => (trailers = t));
    stream.on("wantTrailers", () => stream.sendTrailers(trailers));
    out.on("end", () => stream.end());
    out.on("error", () => stream.close(http2.constants.NGHTTP2_CANCEL));
    stream.on("close", () => out.close());
    out.pipe(stream, { end: false });
    stream.pipe(out);
  });
  proxy.listen(0, "127.0.0.1");
  await once(proxy, "listening");
  return {
    url: `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`,
    paths,
    close() {
      proxy.close();
      upstream.close();
    },
  };
}

/** relayStatus is a relay's health of a service. */
const relayStatus = async (url: string, service = MetadataService.typeName) =>
  (await createClient(Health, createGrpcTransport({ baseUrl: url })).check({ service })).status;

describe("a relay watches its upstream's health", () => {
  it("moves its calls when the leadership moves, as the members' watches tell it, and asks nothing of them while idle", async () => {
    const [first, second] = [new Leadership(), new Leadership()];
    const a = await startTestServer({}, undefined, 0, { leadership: first, standbyCalls: "refuse" });
    const b = await startTestServer({}, undefined, 0, { leadership: second, standbyCalls: "refuse" });
    first.lead(() => true);
    second.follow(a.url, true);
    const [pa, pb] = [await countingProxy(a.url), await countingProxy(b.url)];
    const relay = await startTestRelay(`${pa.url},${pb.url}`, { holdMs: 5_000 });
    await until(async () => (await relayStatus(relay.url)) === ServingStatus.SERVING);
    const client = createClient(MetadataService, createGrpcTransport({ baseUrl: relay.url }));
    await client.initializeRank({ rank: 0, numPages: 8 });
    expect(pa.paths.filter((p) => p.endsWith("/InitializeRank"))).toHaveLength(1);

    // Idle: every stream the relay has opened on a member so far is all it opens (its watches stay open; polling with Check
    // every 500 ms would have asked each member about three times by now).
    const before = [pa.paths.length, pb.paths.length];
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    expect([pa.paths.length, pb.paths.length]).toEqual(before);
    expect([...pa.paths, ...pb.paths].filter((p) => p.endsWith("/Check"))).toEqual([]);

    // The leadership moves: the watches tell the relay, which sends the next call to b without trying a first.
    const changes = async () => Number(/hf3fs_relay_upstream_changes_total (\d+)/.exec(await (await fetch(`${relay.url}/metrics`)).text())?.[1]);
    const moved = await changes();
    second.lead(() => true);
    first.follow(b.url, true);
    const took = await until(async () => (await changes()) > moved);
    console.log(`the relay moved its calls to the new leader ${took} ms after the leadership moved`);
    await client.initializeRank({ rank: 0, numPages: 8 });
    expect(pa.paths.filter((p) => p.endsWith("/InitializeRank"))).toHaveLength(1);
    expect(pb.paths.filter((p) => p.endsWith("/InitializeRank"))).toHaveLength(1);
    pa.close();
    pb.close();
  });

  it("counts a server that stops answering (SIGSTOP) as gone within about 2 s, and serving again once it answers", async () => {
    const server = await startChildServer(["--in-memory"]);
    const relay = await startTestRelay(server.url, { holdMs: 1_000 });
    await until(async () => (await relayStatus(relay.url)) === ServingStatus.SERVING);
    server.child.kill("SIGSTOP");
    try {
      const gone = await until(async () => (await relayStatus(relay.url)) === ServingStatus.NOT_SERVING);
      console.log(`the relay counted a stopped server as gone after ${gone} ms`);
    } finally {
      server.child.kill("SIGCONT");
    }
    const back = await until(async () => (await relayStatus(relay.url)) === ServingStatus.SERVING);
    console.log(`and as serving again ${back} ms after it was continued`);
    expect((await createClient(MetadataService, createGrpcTransport({ baseUrl: relay.url })).batchExists({ keys: ["k"] })).exists).toEqual([false]);
  });
});

describe("a relay with a call held on a leader that stalls", () => {
  // In a failover the election (about 2 s) usually outlasts the watch's PING (1 s), which finds the stalled leader silent;
  // if it does not, a's watch still counts a as leading until that PING goes unanswered.
  it.each([
    { first: "its watch finds the stalled one silent", waitForSilence: true },
    { first: "the new leader comes", waitForSilence: false },
  ])(
    "sends the call again to the new leader, with no PING on the calls' connection to wait for, when $first first",
    async ({ waitForSilence }) => {
      const { standby: b, proxy, heldThroughTakeOver } = await stallableLeader();
      // The calls' connection is PINGed every 10 minutes, and not for a call held: only the move to the new leader can free it.
      const relay = await startTestRelay(`${proxy.url},${b.url}`, { holdMs: 60_000, upstreamPingMs: 600_000, upstreamHeldPingMs: 600_000 });
      await until(async () => (await relayStatus(relay.url)) === ServingStatus.SERVING);
      const client = createClient(MetadataService, createGrpcTransport({ baseUrl: relay.url }));
      await client.initializeRank({ rank: 0, numPages: 8 });

      const silent = () => until(async () => (await relayStatus(relay.url)) === ServingStatus.NOT_SERVING);
      const { answer, ms } = await heldThroughTakeOver(() => client.batchExists({ keys: ["k"] }), { before: waitForSilence ? silent : undefined });
      expect(answer.exists).toEqual([false]); // answered by b: a, stalled, answers nothing
      expect(proxy.pingsHeld()).toBe(0); // the calls' connection was closed once the relay moved and its watch had found a silent
      console.log(`the held call was answered ${ms} ms after b came to lead`);
    },
    30_000,
  );
});
