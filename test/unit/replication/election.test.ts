import type { Etcd3 } from "etcd3";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { ClusterKeys } from "../../../src/replication/cluster-keys.js";
import { Election } from "../../../src/replication/election.js";
import type { EtcdSession } from "../../../src/replication/etcd-session.js";
import type { Watches } from "../../../src/replication/watch.js";
import { Leadership } from "../../../src/service/leadership.js";

/** etcdNaming is an etcd client whose leader key names, at each read, the next of `urls` (the last one from then on). */
function etcdNaming(urls: string[]): Etcd3 {
  let read = 0;
  const range = async () => {
    const url = urls[Math.min(read++, urls.length - 1)]!;
    return { header: { revision: String(read) }, kvs: [{ value: Buffer.from(JSON.stringify({ memberId: url, url })) }] };
  };
  return { kv: { range } } as unknown as Etcd3;
}

/** A session whose lease always holds. */
const session = {
  valid: () => true,
  call: <T>(make: (options: object) => Promise<T>) => make({}),
  lost: new Promise(() => undefined),
} as unknown as EtcdSession;

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
