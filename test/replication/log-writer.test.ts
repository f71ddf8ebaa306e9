import { Etcd3 } from "etcd3";
import { afterEach, describe, expect, it } from "vitest";
import type { Change } from "../../src/core/change.js";
import { MetadataError, Reason } from "../../src/core/errors.js";
import { unaryAppend } from "../../src/replication/append-txn.js";
import { ClusterKeys } from "../../src/replication/cluster-keys.js";
import { EtcdSession } from "../../src/replication/etcd-session.js";
import { LocalCopy } from "../../src/replication/local-copy.js";
import { etcd3Append, type LogAppend } from "../../src/replication/log-append.js";
import { decodeGroup, decodePart } from "../../src/replication/log-codec.js";
import { LogWriter } from "../../src/replication/log-writer.js";
import { etcdLeanClient } from "../../src/server/etcd-lean-client.js";
import { LmdbStore } from "../../src/store/lmdb-store.js";
import { lacking } from "../support/debian-packages.js";
import { startEtcdCluster } from "../support/etcd-cluster.js";
import { tempDir } from "../support/temp-dir.js";

const missing = lacking("the log writer tests", "etcd");

const CHANGE: Change = { kind: "rank", namespace: "kv", rank: 0, numPages: 8, worldSize: 1 };

/** APPENDS are the two ways of sending an append: the etcd3 client's, and the lean one members use (etcd-lean-client.ts). */
const APPENDS = ["etcd3", "lean"] as const;

describe.skipIf(missing !== "").each(APPENDS)("the leader's log writer, on etcd (appends through the %s client)", (way) => {
  const closing: (() => Promise<void> | void)[] = [];
  afterEach(async () => {
    for (const close of closing.splice(0).reverse()) await close();
  });

  /** term puts the leader key with a new lease, as a member that won does, and returns a writer of that term. */
  async function setUp() {
    const etcd = await startEtcdCluster(1);
    const client = new Etcd3({ hosts: etcd.endpoints });
    const local = await LmdbStore.open(tempDir());
    closing.push(
      () => client.close(),
      () => local.close(),
    );
    const keys = new ClusterKeys("test");
    const lean = etcdLeanClient({ hosts: etcd.endpoints.split(",") });
    closing.push(() => lean.close());
    const append: LogAppend = way === "etcd3" ? etcd3Append(client) : unaryAppend(lean.txn);
    const term = async () => {
      const lease = await EtcdSession.grant(client, 2_000);
      closing.push(() => lease.release());
      const res = await client.kv.txn({
        compare: [{ key: keys.leader, target: "Create", result: "Equal", create_revision: 0 }],
        success: [{ request_put: { key: keys.leader, value: Buffer.from("{}"), lease: lease.id } }],
      });
      expect(res.succeeded).toBe(true);
      return { lease, revision: res.header.revision };
    };
    const entries = async () => {
      const res = await client.kv.range({ key: keys.log, range_end: keys.logEnd });
      return res.kvs.map((kv) => [keys.seqOf(kv.key), decodeGroup(decodePart(kv.value).bytes)] as const);
    };
    return { client, append, local, keys, term, entries };
  }

  it("acknowledges a commit once its entry is in etcd, and hands it to the local store", async () => {
    const { append, local, keys, term, entries } = await setUp();
    const { lease, revision } = await term();
    const writer = new LogWriter(append, keys, lease, revision, 1, new LocalCopy(local));
    await writer.commit([CHANGE]);
    expect(await entries()).toEqual([[1, [CHANGE]]]);
    await writer.localDone();
    expect(local.appliedSeq).toBe(1);
  });

  it("a deposed leader's append fails NOT_LEADER and leaves nothing in the log, even while its lease holds", async () => {
    const { client, append, local, keys, term, entries } = await setUp();
    const old = await term();
    const writer = new LogWriter(append, keys, old.lease, old.revision, 1, new LocalCopy(local));
    // Another member takes the leader key (as after the old one's lease lapsed); the old lease still looks valid locally.
    await client.kv.deleteRange({ key: keys.leader });
    await term();
    expect(old.lease.valid()).toBe(true);
    const error = await writer.commit([CHANGE]).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(MetadataError);
    expect((error as MetadataError).reason).toBe(Reason.NOT_LEADER);
    expect(await entries()).toEqual([]);
    // The term is over: every later commit, reads included, is refused too.
    await expect(writer.commit([])).rejects.toThrow(/stopped leading/);
  });
});
