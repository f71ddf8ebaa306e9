import { Etcd3, GRPCDeadlineExceededError, isRecoverableError } from "etcd3";
import { afterEach, describe, expect, it } from "vitest";
import { unaryAppend } from "../../src/replication/append-txn.js";
import { ClusterKeys } from "../../src/replication/cluster-keys.js";
import { KeepAliveStream } from "../../src/replication/keep-alive-stream.js";
import { unaryKeepAlives } from "../../src/replication/lease-keep-alive.js";
import { etcd3LogEnd, unaryLogEnd } from "../../src/replication/log-end.js";
import { attempts, within } from "../../src/replication/within.js";
import { etcdLeanClient } from "../../src/server/etcd-lean-client.js";
import { lacking } from "../support/debian-packages.js";
import { etcdFollower, freePort, startEtcdCluster } from "../support/etcd-cluster.js";
import { pause } from "../support/pause.js";

const missing = lacking("the lean etcd client tests", "etcd");

describe.skipIf(missing !== "")("the lean etcd client (the leader's appends, a standby's questions of the log's end, the lease's keep-alives)", () => {
  const closing: (() => void)[] = [];
  afterEach(() => {
    for (const close of closing.splice(0)) close();
  });

  /** setUp starts `size` etcd members, an etcd3 client and a lean one of them, and puts the leader key. */
  async function setUp(size: number) {
    const etcd = await startEtcdCluster(size);
    const client = new Etcd3({ hosts: etcd.endpoints.split(",") });
    const lean = etcdLeanClient({ hosts: etcd.endpoints.split(",") });
    closing.push(
      () => client.close(),
      () => lean.close(),
    );
    const keys = new ClusterKeys("test");
    return { etcd, client, lean, keys, termRevision: await leaderOf(client, keys) };
  }

  /** leaderOf puts the leader key, as a member that won, and answers its create_revision. */
  async function leaderOf(client: Etcd3, keys: ClusterKeys): Promise<string> {
    await client.put(keys.leader).value("{}");
    return (await client.kv.range({ key: keys.leader })).kvs[0]!.create_revision;
  }

  it("puts an entry under the fence, and answers a refused one as etcd3's client does: whose term it is, whether the entry is there", async () => {
    const { client, lean, keys, termRevision } = await setUp(1);
    const append = unaryAppend(lean.txn);
    const entry = { fence: keys.heldBy(termRevision), key: keys.logEntry(1), value: Buffer.from([0, 1, 2, 255]) };

    expect(await append(entry, within(2_000))).toEqual({ succeeded: true, leaderRevision: undefined, entryExists: false });
    expect((await client.kv.range({ key: keys.logEntry(1) })).kvs[0]!.value).toEqual(Buffer.from([0, 1, 2, 255]));
    // The same append again (a retry whose first answer was lost): refused, its entry there, the term still this one.
    expect(await append(entry, within(2_000))).toEqual({ succeeded: false, leaderRevision: termRevision, entryExists: true });
    // Another term: the fence refuses a new entry and names the term that holds the key.
    await client.delete().key(keys.leader);
    const next = await leaderOf(client, keys);
    expect(await append({ ...entry, key: keys.logEntry(2) }, within(2_000))).toEqual({ succeeded: false, leaderRevision: next, entryExists: false });
    expect((await client.kv.range({ key: keys.logEntry(2) })).kvs).toEqual([]);
  });

  it("answers a standby's question of the log's end as etcd3's client does: the last entry from where it asks, none past it, no key outside the log", async () => {
    const { client, lean, keys } = await setUp(1);
    const ways = [etcd3LogEnd(client, keys), unaryLogEnd(lean.txn, keys)];
    const ask = (from: number) => Promise.all(ways.map((logEnd) => logEnd(from, within(2_000))));
    expect(await ask(1)).toEqual([undefined, undefined]);
    // Entries 1 to 20 (past 16: a key whose hex sequence number grows a digit), and a key just past the log's range.
    for (let seq = 1; seq <= 20; seq++) await client.put(keys.logEntry(seq)).value(String(seq));
    await client.put(keys.logEnd).value("not an entry");
    expect(await ask(1)).toEqual([20, 20]);
    expect(await ask(20)).toEqual([20, 20]);
    expect(await ask(21)).toEqual([undefined, undefined]);
  });

  it("fails as etcd3 would where no etcd answers: a refused connection is recoverable, a silent endpoint runs out its deadline", async () => {
    const closed = `http://127.0.0.1:${await freePort()}`;
    const lean = etcdLeanClient({ hosts: [closed] });
    closing.push(() => lean.close());
    const keys = new ClusterKeys("test");
    const append = unaryAppend(lean.txn);
    const entry = { fence: keys.heldBy("1"), key: keys.logEntry(1), value: Buffer.from("x") };
    const refused = await append(entry, within(2_000)).catch((e: Error) => e);
    expect(isRecoverableError(refused as Error)).toBe(true);

    // A member paused (SIGSTOP) accepts the connection and answers nothing.
    const etcd = await startEtcdCluster(1);
    const silent = etcdLeanClient({ hosts: etcd.endpoints.split(",") });
    closing.push(() => silent.close());
    await pause(etcd.members[0]!.process!.pid!);
    try {
      const started = performance.now();
      const error = await unaryAppend(silent.txn)(entry, within(300)).catch((e: Error) => e);
      expect(error).toBeInstanceOf(GRPCDeadlineExceededError);
      expect(performance.now() - started).toBeLessThan(1_500);
    } finally {
      process.kill(etcd.members[0]!.process!.pid!, "SIGCONT");
    }
  });

  it("asks etcd for a new token once etcd no longer knows the one it gave", async () => {
    const { etcd, client, keys, termRevision } = await setUp(1);
    await client.role("root").create();
    await client.user("root").create("the root password");
    await client.user("root").addRole("root");
    await client.auth.authEnable();
    const auth = { username: "root", password: "the root password" };
    const lean = etcdLeanClient({ hosts: etcd.endpoints.split(","), auth });
    const admin = new Etcd3({ hosts: etcd.endpoints.split(","), auth });
    closing.push(
      () => lean.close(),
      () => admin.close(),
    );
    const append = unaryAppend(lean.txn);
    const entry = (seq: number) => ({ fence: keys.heldBy(termRevision), key: keys.logEntry(seq), value: Buffer.from(String(seq)) });
    expect((await append(entry(1), within(2_000))).succeeded).toBe(true);
    // etcd's simple tokens are dropped when auth is turned off: the lean client's token is unknown once it is back on.
    await admin.auth.authDisable();
    await client.auth.authEnable();
    // Calls under way when etcd forgot the token ask for one new token between them, not one each.
    const before = await authenticated(etcd.endpoints);
    const answers = await Promise.all([2, 3, 4, 5, 6, 7, 8, 9].map((seq) => append(entry(seq), within(2_000))));
    expect(answers.map((a) => a.succeeded)).toEqual(Array(8).fill(true));
    expect((await authenticated(etcd.endpoints)) - before).toBe(1);
    expect((await admin.kv.range({ key: keys.logEntry(2) })).kvs[0]!.value).toEqual(Buffer.from("2"));
    // A member's lease keep-alives go on the same client, with the same token.
    const lease = admin.lease(5, { autoKeepAlive: false });
    lease.on("lost", () => undefined);
    expect(await unaryKeepAlives(lean.keepAlive, await lease.grant()).once(within(2_000))).toBe(5);
  });

  /** authenticated is how many Auth.Authenticate calls etcd answered OK so far (its /metrics). */
  async function authenticated(endpoint: string): Promise<number> {
    const metrics = await (await fetch(`${endpoint}/metrics`)).text();
    return Number(/grpc_server_handled_total\{grpc_code="OK",grpc_method="Authenticate"[^}]*\} (\d+)/.exec(metrics)?.[1] ?? 0);
  }

  it("keeps a lease alive as etcd3's stream does: its TTL at each keep-alive, 0 once the lease is gone", async () => {
    const { client, lean } = await setUp(1);
    const lease = client.lease(5, { autoKeepAlive: false });
    lease.on("lost", () => undefined);
    const id = await lease.grant();
    const ways = [new KeepAliveStream(client, id), unaryKeepAlives(lean.keepAlive, id)];
    closing.push(...ways.map((way) => () => way.close()));
    expect(await Promise.all(ways.map((way) => way.once(within(2_000))))).toEqual([5, 5]);
    await lease.revoke();
    expect(await Promise.all(ways.map((way) => way.once(within(2_000))))).toEqual([0, 0]);
  });

  it("sends no call to an endpoint for a second after one ran out there (a paused etcd member), and every call meanwhile is answered", async () => {
    const { etcd, client, lean } = await setUp(3);
    const lease = client.lease(5, { autoKeepAlive: false });
    lease.on("lost", () => undefined);
    const keepAlives = unaryKeepAlives(lean.keepAlive, await lease.grant());
    // A follower, so that etcd keeps its leader: a call to the paused member is the only one that can run out.
    const paused = (await etcdFollower(etcd)).process!;
    await pause(paused.pid!);
    try {
      const answered = () =>
        keepAlives.once(within(300)).then(
          () => true,
          (e: Error) => (e instanceof GRPCDeadlineExceededError ? false : Promise.reject(e)),
        );
      while (await answered());
      const ranOut = performance.now();
      // At random among three, ten calls would miss the paused member with a chance of (2/3)^10, under 2%.
      let calls = 0;
      while (performance.now() - ranOut < 800) {
        expect(await answered()).toBe(true);
        calls++;
      }
      expect(calls).toBeGreaterThanOrEqual(10);
    } finally {
      paused.kill("SIGCONT");
    }
  });

  it("goes on through the others while one of three endpoints is gone, within attempts()", async () => {
    const { etcd, lean, keys, termRevision } = await setUp(3);
    // A follower: etcd's own leader gone is an election, whose time on a busy machine is not this client's.
    await (await etcdFollower(etcd)).kill();
    const append = unaryAppend(lean.txn);
    for (let seq = 1; seq <= 10; seq++) {
      const entry = { fence: keys.heldBy(termRevision), key: keys.logEntry(seq), value: Buffer.from(String(seq)) };
      expect((await attempts(5_000, (options) => append(entry, options))).succeeded).toBe(true);
    }
  });
});
