import { EventEmitter } from "node:events";
import { Etcd3, type IKeyValue, type WatchBuilder } from "etcd3";
import { afterEach, describe, expect, it } from "vitest";
import { Watches, WatchNotOpened, watch } from "../../src/replication/watch.js";
import { lacking } from "../support/debian-packages.js";
import { startEtcdCluster } from "../support/etcd-cluster.js";
import { until } from "../support/until.js";

const missing = lacking("the watch tests", "etcd");

/** OPEN_MS is the tests' bound on a watch's opening: long enough for a loaded machine, short enough to fail fast. */
const OPEN_MS = 3_000;

/** stream collects the keys a watch hears, and why it ended. */
function stream() {
  const keys: string[] = [];
  let ended!: (error: Error) => void;
  const end = new Promise<Error>((resolve) => (ended = resolve));
  return { keys, end, events: { put: (kv: IKeyValue) => void keys.push(kv.key.toString()), ended } };
}

describe.skipIf(missing !== "")("watches on etcd", () => {
  const clients: Etcd3[] = [];
  afterEach(() => {
    for (const client of clients.splice(0)) client.close();
  });

  async function setUp() {
    const etcd = await startEtcdCluster(1);
    const connect = () => {
      const client = new Etcd3({ hosts: etcd.endpoints });
      clients.push(client);
      return client;
    };
    return { connect, client: connect() };
  }

  it("a watch etcd canceled (it began at a compacted revision), once closed, leaves the client able to watch", async () => {
    const { client } = await setUp();
    // Another watch keeps the client's stream open, as a member's watch of the leader key does.
    const leader = stream();
    const closeLeader = await watch(client.watch().key("leader"), leader.events, OPEN_MS);
    for (let i = 0; i < 5; i++) await client.put(`k${i}`).value("v");
    const last = await client.put("k5").value("v");
    await client.kv.compact({ revision: last.header.revision });
    const compacted = stream();
    const close = await watch(client.watch().prefix("k").startRevision("2"), compacted.events, OPEN_MS);
    expect((await compacted.end).message).toMatch(/canceled/);
    await close();
    // Canceling it again on close made the etcd3 package throw on etcd's answer; its stream then opened no watch.
    const fresh = stream();
    const closeFresh = await watch(client.watch().prefix("k"), fresh.events, OPEN_MS);
    await client.put("k6").value("v");
    await until(() => fresh.keys.includes("k6"));
    await closeFresh();
    await closeLeader();
  });

  it("a watch that does not open renews the client: the old one is closed, the next watch opens on a new one", async () => {
    const { connect } = await setUp();
    // The first client's stream never confirms a watch, as a wedged one does.
    const closed: string[] = [];
    const builder = { prefix: () => builder, watcher: () => Object.assign(new EventEmitter(), { cancel: async () => undefined }) };
    const wedged = { watch: () => builder as unknown as WatchBuilder, close: () => void closed.push("wedged") } as unknown as Etcd3;
    const made = [wedged];
    const watches = new Watches(() => made.shift() ?? connect(), OPEN_MS);
    const first = stream();
    await expect(watches.open((c) => c.watch().prefix("k"), first.events)).rejects.toBeInstanceOf(WatchNotOpened);
    expect(closed).toEqual(["wedged"]);
    const second = stream();
    const close = await watches.open((c) => c.watch().prefix("k"), second.events);
    await clients[0]!.put("k1").value("v");
    await until(() => second.keys.includes("k1"));
    await close();
    watches.close();
  });
});
