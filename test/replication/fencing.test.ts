import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { describe, expect, it } from "vitest";
import { ErrorInfoSchema, MetadataService, Reason } from "../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { createMetadataClient } from "../../src/client/index.js";
import { lacking } from "../support/debian-packages.js";
import { startEtcdCluster } from "../support/etcd-cluster.js";
import { type Server, startServer, waitForLeader } from "../support/ha-cluster.js";

const missing = lacking("the HA fencing tests", "etcd");

/** rawClient calls one member, without retries or redirects: what it answers is what the test sees. */
/** REFUSE makes standbys answer NOT_LEADER, as clients that route themselves want. */
const REFUSE = ["--standby-calls", "refuse"];

function rawClient(server: Server) {
  return createClient(MetadataService, createGrpcTransport({ baseUrl: server.url }));
}

/** outcome is "ok", or the reason's name of a failed call. */
function outcome(call: Promise<unknown>): Promise<string> {
  return call.then(
    () => "ok",
    (e) => {
      const error = ConnectError.from(e);
      return `${Code[error.code]} ${Reason[error.findDetails(ErrorInfoSchema)[0]?.reason ?? Reason.UNSPECIFIED]}`;
    },
  );
}

describe.skipIf(missing !== "")("high availability on etcd: fencing", () => {
  it("a leader paused (SIGSTOP) until another is elected acknowledges nothing when it wakes, and names the new leader", async () => {
    const etcd = await startEtcdCluster(3);
    // Standbys that refuse (--standby-calls refuse): what a deposed leader answers is the point here, not forwarding.
    const servers = await Promise.all([0, 1, 2].map(() => startServer(etcd, undefined, REFUSE)));
    const paused = await waitForLeader(servers);
    const cluster = createMetadataClient({ baseUrl: servers.map((s) => s.url).join(",") });
    await cluster.initializeRank({ namespace: "f", rank: 0, numPages: 64, worldSize: 1 });

    paused.process.child.kill("SIGSTOP");
    const others = servers.filter((s) => s !== paused);
    const leader = await waitForLeader(others);
    // Calls to the paused leader wait in its socket until it wakes.
    const direct = rawClient(paused);
    const late = Array.from({ length: 8 }, (_, i) => outcome(direct.batchAllocate({ namespace: "f", rank: 0, keys: [`late-${i}`] })));
    paused.process.child.kill("SIGCONT");
    expect(await Promise.all(late)).toEqual(Array(8).fill("Unavailable NOT_LEADER"));

    // Nothing of them reached the state: the new leader holds no reservation.
    const stats = await cluster.getStats({ namespace: "f" });
    expect(stats.namespaces[0]!.ranks[0]!.reservedPages).toBe(0);
    // Once it has read the leader key, the woken member names the new leader. The probe is a write: a read
    // it may answer itself once it holds the log's end (--standby-read-lag), refuse or not.
    const deadline = Date.now() + 10_000;
    let leaderUrl = "";
    for (let i = 0; leaderUrl !== leader.url && Date.now() < deadline; i++) {
      const error = await direct.batchAllocate({ namespace: "f", rank: 0, keys: [`probe-${i}`] }).then(
        () => undefined,
        (e) => ConnectError.from(e),
      );
      expect(error?.code).toBe(Code.Unavailable);
      leaderUrl = error!.findDetails(ErrorInfoSchema)[0]!.leaderUrl;
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(leaderUrl).toBe(leader.url);
  }, 60_000);

  it("etcd: one member down, the service goes on; two down, writes fail UNAVAILABLE; both back, it resumes by itself", async () => {
    const etcd = await startEtcdCluster(3);
    // Without a leader, calls wait --startup-hold for one (60 s by default): half a second here, so the loop below sees many refusals.
    const servers = await Promise.all([0, 1].map(() => startServer(etcd, undefined, ["--startup-hold", "500ms", ...REFUSE])));
    await waitForLeader(servers);
    const cluster = createMetadataClient({ baseUrl: servers.map((s) => s.url).join(","), retry: { deadlineMs: 30_000 } });
    await cluster.initializeRank({ namespace: "q", rank: 0, numPages: 1024, worldSize: 1 });
    const allocate = (key: string) => cluster.batchAllocate({ namespace: "q", rank: 0, keys: [key] });

    await etcd.members[0]!.kill();
    expect((await allocate("one-down")).pages).toHaveLength(1);

    await etcd.members[1]!.kill();
    // Without quorum no member acknowledges a write: every attempt, on every member, fails UNAVAILABLE.
    const outcomes: string[] = [];
    const until = Date.now() + 4_000;
    for (let i = 0; Date.now() < until; i++) {
      for (const server of servers) outcomes.push(await outcome(rawClient(server).batchAllocate({ namespace: "q", rank: 0, keys: [`no-quorum-${i}`] })));
    }
    expect(outcomes.length).toBeGreaterThan(2);
    expect(outcomes.filter((o) => !o.startsWith("Unavailable"))).toEqual([]);

    await Promise.all([etcd.members[0]!.start(), etcd.members[1]!.start()]);
    expect((await allocate("back")).pages).toHaveLength(1);
    expect((await cluster.batchExists({ namespace: "q", keys: ["one-down"] })).exists).toEqual([false]); // reserved, not confirmed
    const stats = await cluster.getStats({ namespace: "q" });
    expect(stats.namespaces[0]!.ranks[0]!.reservedPages).toBeGreaterThanOrEqual(2);
  }, 90_000);
});
