import type { Etcd3 } from "etcd3";
import { afterEach, describe, expect, it } from "vitest";
import { etcdClient } from "../../src/replication/etcd-client.js";
import { EtcdSession } from "../../src/replication/etcd-session.js";
import { unaryKeepAlives } from "../../src/replication/lease-keep-alive.js";
import { attempts } from "../../src/replication/within.js";
import { etcdLeanClient } from "../../src/server/etcd-lean-client.js";
import { lacking } from "../support/debian-packages.js";
import { type EtcdMember, etcdFollower, etcdLeaderIndex, etcdStatus, startEtcdCluster } from "../support/etcd-cluster.js";
import { pause } from "../support/pause.js";

const missing = lacking("the etcd client tests", "etcd");

describe.skipIf(missing !== "")("a member's etcd client", () => {
  const clients: Etcd3[] = [];
  afterEach(() => {
    for (const client of clients.splice(0)) client.close();
  });

  it("writes again as soon as etcd has a leader again, however many calls failed meanwhile: no circuit breaker keeps live members shut", async () => {
    const etcd = await startEtcdCluster(3);
    const client = etcdClient({ hosts: etcd.endpoints.split(","), dialTimeout: 2_000 });
    clients.push(client);
    await client.put("k").value("before");
    const [a, b, c] = etcd.members as [(typeof etcd.members)[0], (typeof etcd.members)[0], (typeof etcd.members)[0]];
    await Promise.all([a.kill(), b.kill()]);
    // Without quorum every call fails, on every member: more than the three in a row that open the package's default breaker per host.
    let failures = 0;
    for (let i = 0; i < 12; i++) {
      await client
        .put("k")
        .value(`no-quorum-${i}`)
        .options({ deadline: new Date(Date.now() + 300) })
        .exec()
        .catch(() => failures++);
    }
    expect(failures).toBe(12);
    await a.start();
    const namesALeader = (m: EtcdMember) =>
      etcdStatus(m.clientUrl).then(
        (s) => s.leader !== "0",
        () => false,
      );
    while (!(await Promise.all([a, c].map(namesALeader))).every(Boolean)) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    // With the default breaker these would be refused for 5 s ("the circuit breaker is open"); here each goes through,
    // made as the member makes its calls (attempts: again, on another endpoint, after a failure such as the dead member's).
    for (let i = 0; i < 5; i++) await attempts(2_000, (options) => client.put("k").value(`after-${i}`).options(options).exec());
    expect(await attempts(2_000, (options) => client.get("k").options(options).string())).toBe("after-4");
  });
});

describe.skipIf(missing !== "")("a member's etcd calls (attempts)", () => {
  it("keep a lease of the default TTL alive, and writes going, while etcd's own leader is paused (SIGSTOP) for 3 s", async () => {
    // No keepalive is answered while etcd elects, and an election starts 1-2 election timeouts after the leader went silent: at
    // 500 ms that is up to 1 s of the 1.45-1.7 s a 2 s lease is trusted without an answer, which a busy machine's election passed
    // now and then (high-availability.md). This test is the member's part, its keepalives across a change of etcd's leader: etcd elects within 250-500 ms here.
    // The keep-alives go as a member's do, on its lean client: each to an endpoint past those that let one run out. On one
    // etcd3 stream (KeepAliveStream), whose endpoint is the package's pick at random, the lease lapsed now and then on a
    // loaded machine, the paused leader holding stream after stream (docs/high-availability.md).
    const etcd = await startEtcdCluster(3, undefined, { heartbeatMs: 25, electionMs: 250 });
    const client = etcdClient({ hosts: etcd.endpoints.split(","), dialTimeout: 2_000 });
    const lean = etcdLeanClient({ hosts: etcd.endpoints.split(",") });
    try {
      const session = await EtcdSession.grant(client, 2_000, (id) => unaryKeepAlives(lean.keepAlive, id));
      const index = await etcdLeaderIndex(etcd);
      const leader = etcd.members[index]!.process!;
      const pausedId = (await etcdStatus(etcd.members[index]!.clientUrl)).id;
      leader.kill("SIGSTOP");
      const paused = performance.now();
      try {
        // Writers as a leader's appends are, each put in attempts, while the old leader stays paused: 3 s, and at least 1.5 s
        // after the others elected another (on a loaded machine etcd's election itself may take seconds: not the client's).
        let electedAt = Number.POSITIVE_INFINITY;
        const others = etcd.members.filter((_, i) => i !== index);
        const elected = (async () => {
          for (;;) {
            const statuses = await Promise.all(others.map((m) => etcdStatus(m.clientUrl).catch(() => ({ leader: "0" }))));
            if (statuses.some((st) => st.leader !== "0" && st.leader !== pausedId)) {
              electedAt = performance.now();
              return;
            }
            await new Promise((resolve) => setTimeout(resolve, 20));
          }
        })();
        const writing = () => performance.now() - paused < 3_000 || performance.now() - electedAt < 1_500;
        const written = await Promise.all(
          [0, 1, 2, 3].map(async (writer) => {
            const done: number[] = [];
            while (writing()) {
              await attempts(10_000, (options) => client.put(`k${writer}`).value(`${done.length}`).options(options).exec());
              done.push(performance.now());
            }
            return done;
          }),
        );
        await elected;
        console.log(
          `etcd elected ${Math.round(electedAt - paused)} ms after its leader was paused; puts after that: ${written.map((done) => done.filter((at) => at > electedAt).length).join(", ")}`,
        );
        // Each writer went on once etcd had a leader again: it did not stay on the paused member.
        expect(written.map((done) => done.some((at) => at > electedAt))).toEqual([true, true, true, true]);
        expect(session.valid()).toBe(true);
      } finally {
        // Not asked after: etcd without the fix of etcd-io/etcd#12528 (Debian 12's 3.4.23) revokes the lease when the old leader wakes.
        leader.kill("SIGCONT");
        session.release();
      }
    } finally {
      client.close();
      lean.close();
    }
  });

  it("move off an etcd member that stopped answering (SIGSTOP) after one attempt, and keep off it while it stays silent", async () => {
    const etcd = await startEtcdCluster(3);
    const client = etcdClient({ hosts: etcd.endpoints.split(","), dialTimeout: 2_000 });
    try {
      await client.put("k").value("before");
      // A follower: etcd's own leader paused stalls every member until they elect another (the test above), which on a busy
      // machine took longer than these calls' budget; this test is the client's part, a silent endpoint among live ones.
      const paused = (await etcdFollower(etcd)).process!;
      paused.kill("SIGSTOP");
      try {
        // Each put goes to a member chosen at random: one that meets the paused member is made again elsewhere, within the budget.
        for (let i = 0; i < 10; i++) await attempts(3_000, (options) => client.put("k").value(`paused-${i}`).options(options).exec());
        expect(await attempts(3_000, (options) => client.get("k").options(options).string())).toBe("paused-9");
      } finally {
        paused.kill("SIGCONT");
      }
    } finally {
      client.close();
    }
  });

  it("say that etcd did not answer, not grpc-js's stage ('waiting for name resolution' for an IP address)", async () => {
    const etcd = await startEtcdCluster(1);
    const client = etcdClient({ hosts: etcd.endpoints.split(","), dialTimeout: 2_000 });
    const paused = etcd.members[0]!.process!;
    await pause(paused.pid!);
    try {
      const error = (await attempts(700, (options) => client.get("k").options(options).string()).catch((e: Error) => e)) as Error;
      expect(JSON.stringify(error.message)).toMatch(/^"etcd did not answer within \d+ ms \(\d+ attempts? of at most 600 ms\)"$/);
      expect(error.message).not.toMatch(/name resolution|circuit/);
    } finally {
      paused.kill("SIGCONT");
      client.close();
    }
  });
});
