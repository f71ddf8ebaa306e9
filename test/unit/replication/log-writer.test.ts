import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { Change } from "../../../src/core/index.js";
import { ClusterKeys } from "../../../src/replication/cluster-keys.js";
import type { LocalCopy } from "../../../src/replication/local-copy.js";
import type { LogAppend } from "../../../src/replication/log-append.js";
import { LogWriter } from "../../../src/replication/log-writer.js";
import { heldSession } from "../../support/held-session.js";

/** etcdAnsweringAfter is an etcd whose appends succeed after `ms` each. */
function etcdAnsweringAfter(ms: number): LogAppend {
  return () => new Promise((resolve) => setTimeout(() => resolve({ succeeded: true, leaderRevision: undefined, entryExists: false }), ms));
}

const session = heldSession();
const local = { write: () => undefined } as unknown as LocalCopy;
const change: Change = { kind: "unreserve", namespace: "kv", rank: 0, page: 3 };

describe("a leader's appends (LogWriter)", () => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "performance"] });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it.each([
    [400, 0],
    [1_500, 1],
  ])("an append that takes %i ms is logged %i times, with how long it took", async (ms, logged) => {
    const warn = vi.fn();
    const writer = new LogWriter(etcdAnsweringAfter(ms), new ClusterKeys("test"), session, "1", 1, local, { warn });
    const committed = writer.commit([change]);
    await vi.advanceTimersByTimeAsync(ms);
    await committed;
    expect(warn).toHaveBeenCalledTimes(logged);
    if (logged > 0) expect(warn).toHaveBeenCalledWith({ tookMs: ms, calls: 1, lastSeq: 1 }, "cluster: a slow append to the log");
  });

  it("cuts a group after the commits before the cut: they end at the entry it gives, the commits after go in the next group", async () => {
    const groups: { seq: number; changes: readonly Change[] }[] = [];
    const copy = { write: (changes: readonly Change[], seq: number) => groups.push({ seq, changes }) } as unknown as LocalCopy;
    const writer = new LogWriter(etcdAnsweringAfter(10), new ClusterKeys("test"), session, "1", 1, copy);
    const other: Change = { kind: "unreserve", namespace: "kv", rank: 0, page: 4 };
    const inFlight = writer.commit([change]); // appended at once, alone
    const before = writer.commit([other]);
    const cut = writer.cut();
    const after = writer.commit([change, other]);
    await vi.advanceTimersByTimeAsync(50);
    await Promise.all([inFlight, before, after]);
    expect(await cut).toBe(2);
    expect(groups).toEqual([
      { seq: 1, changes: [change] },
      { seq: 2, changes: [other] },
      { seq: 3, changes: [change, other] },
    ]);
    // With nothing queued or in flight, a cut is the last entry (after the linger of a writer busy a moment ago).
    const last = writer.cut();
    await vi.advanceTimersByTimeAsync(5);
    expect(await last).toBe(3);
  });

  it("appends a commit after a quiet spell at once; one that comes close after it lingers, so that the commits meanwhile share its append", async () => {
    const groups: (readonly Change[])[] = [];
    const copy = { write: (changes: readonly Change[]) => groups.push(changes) } as unknown as LocalCopy;
    const writer = new LogWriter(etcdAnsweringAfter(1), new ClusterKeys("test"), session, "1", 1, copy);
    const [a, b, c, d] = [3, 4, 5, 6].map((page): Change => ({ kind: "unreserve", namespace: "kv", rank: 0, page }));
    const first = writer.commit([a!]);
    await vi.advanceTimersByTimeAsync(1);
    await first;
    expect(groups).toEqual([[a]]);
    const second = writer.commit([b!]);
    await vi.advanceTimersByTimeAsync(1);
    expect(groups).toHaveLength(1); // lingering
    const third = writer.commit([c!]);
    await vi.advanceTimersByTimeAsync(2);
    await Promise.all([second, third]);
    expect(groups).toEqual([[a], [b, c]]);
    await vi.advanceTimersByTimeAsync(100);
    const fourth = writer.commit([d!]);
    await vi.advanceTimersByTimeAsync(1);
    await fourth;
    expect(groups).toEqual([[a], [b, c], [d]]);
  });

  it("appends each commit at once while they come slower than one every 8 ms on average (a linger would gather none)", async () => {
    const groups: (readonly Change[])[] = [];
    const copy = { write: (changes: readonly Change[]) => groups.push(changes) } as unknown as LocalCopy;
    const writer = new LogWriter(etcdAnsweringAfter(1), new ClusterKeys("test"), session, "1", 1, copy);
    for (let page = 0; page < 6; page++) {
      const committed = writer.commit([{ kind: "unreserve", namespace: "kv", rank: 0, page }]);
      await vi.advanceTimersByTimeAsync(1);
      await committed;
      expect(groups).toHaveLength(page + 1); // appended within the 1 ms its append takes: no linger
      await vi.advanceTimersByTimeAsync(9);
    }
    // Four commits 3 ms apart: the next append lingers, and the commit that comes meanwhile shares it.
    for (let page = 6; page < 9; page++) {
      void writer.commit([{ kind: "unreserve", namespace: "kv", rank: 0, page }]);
      await vi.advanceTimersByTimeAsync(3);
    }
    const lingering = writer.commit([{ kind: "unreserve", namespace: "kv", rank: 0, page: 9 }]);
    const sharing = writer.commit([{ kind: "unreserve", namespace: "kv", rank: 0, page: 10 }]);
    await vi.advanceTimersByTimeAsync(5);
    await Promise.all([lingering, sharing]);
    expect(groups.at(-1)).toEqual([9, 10].map((page) => ({ kind: "unreserve", namespace: "kv", rank: 0, page })));
  });

  it("rejects a cut whose group the term did not append", async () => {
    const writer = new LogWriter(etcdAnsweringAfter(10), new ClusterKeys("test"), session, "1", 1, local);
    const inFlight = writer.commit([change]);
    const cut = writer.cut().catch((e: Error) => e);
    writer.end("a test ended it");
    expect(await cut).toBeInstanceOf(Error);
    await vi.advanceTimersByTimeAsync(50);
    await inFlight; // the append under way landed: its commit is in the log
    expect(await writer.cut().catch((e: Error) => e)).toBeInstanceOf(Error);
  });
});
