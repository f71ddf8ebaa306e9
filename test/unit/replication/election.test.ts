import type { Etcd3 } from "etcd3";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { ClusterKeys } from "../../../src/replication/cluster-keys.js";
import { Election } from "../../../src/replication/election.js";
import type { Watches } from "../../../src/replication/watch.js";
import { Leadership } from "../../../src/service/leadership.js";
import { heldSession } from "../../support/held-session.js";

/** etcdNaming is an etcd client whose leader key names, at each read, the next of `urls` (the last one from then on). */
function etcdNaming(urls: string[]): Etcd3 {
  let read = 0;
  const range = async () => {
    const url = urls[Math.min(read++, urls.length - 1)]!;
    return { header: { revision: String(read) }, kvs: [{ value: Buffer.from(JSON.stringify({ memberId: url, url })) }] };
  };
  return { kv: { range } } as unknown as Etcd3;
}

const session = heldSession();

describe("a member waiting for its turn (Election)", () => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it("reads the leader key again within 2 s even while its watch does not open (a stalled etcd member)", async () => {
    // A watch that neither opens nor fails for as long as the test runs, as on a paused etcd member (until OPEN_MS).
    const watches = { open: () => new Promise(() => undefined) } as unknown as Watches;
    const stop = new AbortController();
    const leadership = new Leadership();
    const election = new Election(
      etcdNaming(["http://a", "http://b"]),
      watches,
      new ClusterKeys("test"),
      () => ({ memberId: "me", url: "http://me" }),
      leadership,
      stop.signal,
    );
    const turn = election.awaitTurn(session);
    await vi.advanceTimersByTimeAsync(10);
    expect(election.leaderUrl).toBe("http://a");
    await vi.advanceTimersByTimeAsync(2_000);
    expect(election.leaderUrl).toBe("http://b");
    stop.abort();
    await vi.advanceTimersByTimeAsync(2_000);
    expect(await turn).toBeUndefined();
  });

  it("reads it again soon when its watch fails to open", async () => {
    let opens = 0;
    const watches = {
      open: async () => {
        opens++;
        throw new Error("etcd did not open a watch within 5000 ms");
      },
    } as unknown as Watches;
    const stop = new AbortController();
    const election = new Election(
      etcdNaming(["http://a", "http://b"]),
      watches,
      new ClusterKeys("test"),
      () => ({ memberId: "me", url: "http://me" }),
      new Leadership(),
      stop.signal,
    );
    const turn = election.awaitTurn(session);
    await vi.advanceTimersByTimeAsync(100);
    expect(election.leaderUrl).toBe("http://b");
    expect(opens).toBeGreaterThan(1);
    stop.abort();
    await vi.advanceTimersByTimeAsync(2_000);
    expect(await turn).toBeUndefined();
  });
});

/** LeaderKey is the leader key as a fake etcd holds it. */
interface LeaderKey {
  memberId: string;
  lease: string;
  createRevision: string;
}

/** etcdHolding is an etcd client with one leader key (or none; its record names `url`, else http://<member id>), whose txns apply create-revision compares, puts and deletes to it. */
function etcdHolding(initial: LeaderKey | undefined, url?: string): { client: Etcd3; key: () => LeaderKey | undefined; deletes: string[] } {
  let key = initial;
  let revision = 100;
  const deletes: string[] = [];
  const kv = {
    range: async () => ({
      header: { revision: String(revision) },
      kvs:
        key === undefined
          ? []
          : [
              {
                value: Buffer.from(JSON.stringify({ memberId: key.memberId, url: url ?? `http://${key.memberId}` })),
                lease: key.lease,
                create_revision: key.createRevision,
              },
            ],
    }),
    txn: async (req: { compare: { create_revision: number | string }[]; success: Record<string, { lease?: string; value?: Buffer }>[] }) => {
      const held = key?.createRevision ?? 0;
      if (!req.compare.every((c) => String(c.create_revision) === String(held))) return { succeeded: false, header: { revision: String(revision) } };
      revision++;
      for (const op of req.success) {
        if (op.request_put)
          key = { memberId: JSON.parse(op.request_put.value!.toString()).memberId, lease: op.request_put.lease!, createRevision: String(revision) };
        if (op.request_delete_range) {
          deletes.push(key!.createRevision);
          key = undefined;
        }
      }
      return { succeeded: true, header: { revision: String(revision) } };
    },
  };
  return { client: { kv } as unknown as Etcd3, key: () => key, deletes };
}

describe("a member that finds the leader key naming itself (Election)", () => {
  const watches = { open: () => new Promise(() => undefined) } as unknown as Watches;
  /** electing is the election of member "me" at http://me, caught up, on `etcd`. */
  const electing = (etcd: Etcd3, stop = new AbortController().signal) => {
    const leadership = new Leadership();
    leadership.follow("", true);
    return new Election(etcd, watches, new ClusterKeys("test"), () => ({ memberId: "me", url: "http://me" }), leadership, stop);
  };

  it("under an earlier lease (a term of its that is over, or the process before a kill -9): deletes it at once and campaigns, not waiting for that lease to expire", async () => {
    const etcd = etcdHolding({ memberId: "me", lease: "lease-before", createRevision: "7" });
    const won = await electing(etcd.client).awaitTurn(session);
    expect(etcd.deletes).toEqual(["7"]);
    expect(etcd.key()).toEqual({ memberId: "me", lease: "lease-now", createRevision: won });
  });

  it("under its own lease (a campaign that won, its answer lost and its repeat refused): leads, with that key's revision as its fence", async () => {
    const etcd = etcdHolding({ memberId: "me", lease: "lease-now", createRevision: "9" });
    expect(await electing(etcd.client).awaitTurn(session)).toBe("9");
    expect(etcd.deletes).toEqual([]);
  });

  it.each([
    [
      "an earlier lease of its own id at another address (a copy of its data dir serving elsewhere)",
      { memberId: "me", lease: "lease-before", createRevision: "7" },
      "http://copy",
    ],
    ["another member's key", { memberId: "other", lease: "lease-other", createRevision: "5" }, "http://other"],
  ])("under %s: leaves it alone, and names that address", async (_, key, url) => {
    const etcd = etcdHolding(key, url);
    const stop = new AbortController();
    const election = electing(etcd.client, stop.signal);
    const turn = election.awaitTurn(session);
    await vi.waitFor(() => expect(election.leaderUrl).toBe(url));
    stop.abort();
    expect(await turn).toBeUndefined();
    expect(etcd.deletes).toEqual([]);
  });
});
