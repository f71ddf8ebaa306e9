import { describe, expect, it } from "vitest";
import { MetadataState } from "../../../src/core/state.js";
import { MIN_POSITION, SHARD_LOCAL_HEADER } from "../../../src/protocol/headers.js";
import type { LogEnd } from "../../../src/replication/log-end.js";
import { StandbyReads } from "../../../src/replication/standby-reads.js";
import { FakeClock } from "../../support/fake-clock.js";

/** etcdSaying is etcd's answer of the log's end: at the applied entry (`past` false: no entry past it) or one entry past it (true). */
function etcdSaying(past: () => boolean, applied: { seq: number }): LogEnd {
  return async () => (past() ? applied.seq + 1 : undefined);
}

/** standbyReads is a standby's reads over a replayed state at `applied`, told by etcd whether the log goes on; `split`: of a cluster of shards. */
function standbyReads(applied: { seq: number }, past = () => false, split = false) {
  const replica = new MetadataState(new FakeClock().clock);
  return new StandbyReads(
    100,
    () => applied.seq,
    () => replica,
    etcdSaying(past, applied),
    split,
  );
}

/** fresh runs a standby's etcd polls until it learned it holds the log's end once. */
async function fresh(reads: StandbyReads): Promise<void> {
  reads.takes({}, {}); // a read: the standby asks etcd from now on
  const stop = new AbortController();
  const running = reads.run(stop.signal, () => false);
  while (reads.staleMs() > 100) await new Promise((resolve) => setTimeout(resolve, 1));
  stop.abort();
  await running;
}

describe("a standby's reads (StandbyReads)", () => {
  it("are answered here only once etcd said the standby holds the log's end", async () => {
    const reads = standbyReads({ seq: 5 });
    expect(reads.takes({}, {})).toBe(false);
    expect(reads.counts).toEqual({ local: 0, lagging: 1, behind: 0 });
    await fresh(reads);
    expect(reads.takes({}, {})).toBe(true);
    expect(reads.takes({}, {})).toBe(true);
    expect(reads.counts).toEqual({ local: 2, lagging: 2, behind: 0 });
  });

  it("stay with the leader while etcd holds an entry the standby has not applied", async () => {
    const reads = standbyReads({ seq: 5 }, () => true);
    reads.takes({}, {});
    const stop = new AbortController();
    const running = reads.run(stop.signal, () => false);
    await new Promise((resolve) => setTimeout(resolve, 30));
    stop.abort();
    await running;
    expect(reads.staleMs()).toBe(Number.POSITIVE_INFINITY);
    expect(reads.takes({}, {})).toBe(false);
  });

  it("under steady writes (etcd always names an entry past the applied one) are answered here once the standby applied as far as etcd named", async () => {
    const applied = { seq: 5 };
    const reads = standbyReads(applied, () => true);
    reads.takes({}, {});
    const stop = new AbortController();
    const running = reads.run(stop.signal, () => false);
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(reads.staleMs()).toBe(Number.POSITIVE_INFINITY); // waiting for entry 6
    applied.seq = 6;
    reads.applied();
    while (reads.staleMs() > 100) await new Promise((resolve) => setTimeout(resolve, 1));
    stop.abort();
    await running;
    expect(reads.takes({}, {})).toBe(true);
  });

  it("decide a request once: the edge and the forward see the same decision, counted once", async () => {
    const reads = standbyReads({ seq: 5 });
    await fresh(reads);
    const request = {};
    const local = reads.counts.local;
    expect(reads.takes(request, {})).toBe(true);
    expect(reads.takes(request, {})).toBe(true);
    expect(reads.counts.local).toBe(local + 1);
  });

  it("move a read counted lagging to local when it is answered here after its wait: no count goes below zero", async () => {
    const applied = { seq: 5 };
    const reads = standbyReads(applied);
    const request = {};
    expect(reads.takes(request, { [MIN_POSITION]: "6" })).toBe(false); // never known fresh yet: lagging
    expect(reads.counts).toEqual({ local: 0, lagging: 1, behind: 0 });
    const stop = new AbortController();
    const running = reads.run(stop.signal, () => false);
    while (reads.staleMs() > 100) await new Promise((resolve) => setTimeout(resolve, 1));
    const waited = reads.catchUp(request);
    applied.seq = 6;
    reads.applied();
    expect(await waited).toBe(true);
    stop.abort();
    await running;
    expect(reads.counts).toEqual({ local: 1, lagging: 0, behind: 0 });
  });

  it("wait for the position a read names, or for a write this standby passed on, then answer it here", async () => {
    const applied = { seq: 5 };
    const reads = standbyReads(applied);
    await fresh(reads);
    reads.counts.lagging = 0; // the read that woke its questions
    const named = {};
    expect(reads.takes(named, { [MIN_POSITION]: "7" })).toBe(false);
    expect(reads.counts).toEqual({ local: 0, lagging: 0, behind: 1 });
    const waited = reads.catchUp(named);
    applied.seq = 7;
    reads.applied();
    expect(await waited).toBe(true);
    expect(reads.takes(named, {})).toBe(true);
    expect(reads.counts).toEqual({ local: 1, lagging: 0, behind: 0 });

    reads.wrote(9);
    const after = {};
    expect(reads.takes(after, {})).toBe(false);
    // Not applied within the lag: the read goes to the leader.
    expect(await reads.catchUp(after)).toBe(false);
    expect(reads.takes(after, {})).toBe(false);
    expect(reads.counts).toEqual({ local: 1, lagging: 0, behind: 1 });
  });

  it("in a cluster of shards, pass to the leader a whole call's read that names a position, which may be another shard's; answer a shard's own part with it", async () => {
    const applied = { seq: 50 };
    const reads = standbyReads(applied, () => false, true);
    await fresh(reads);
    reads.counts.lagging = 0; // the read that woke its questions
    // A client that does not route wrote at a member of another shard, whose log is at 7: not this shard's 7.
    const whole = {};
    expect(reads.takes(whole, { [MIN_POSITION]: "7" })).toBe(false);
    expect(await reads.catchUp(whole)).toBe(false);
    expect(reads.takes(whole, {})).toBe(false);
    // A relay's part for this shard, with the position it heard from this shard, and a whole call naming none: answered here.
    expect(reads.takes({}, { [MIN_POSITION]: "7", [SHARD_LOCAL_HEADER]: "1" })).toBe(true);
    expect(reads.takes({}, {})).toBe(true);
    expect(reads.counts).toEqual({ local: 2, lagging: 0, behind: 1 });
    // Of one shard, a position is the one log's: the same whole call is answered here.
    const single = standbyReads(applied);
    await fresh(single);
    expect(single.takes({}, { [MIN_POSITION]: "7" })).toBe(true);
  });

  it("idle, ask etcd nothing and wait for no timer: the first read wakes a standby's questions at once, never a leader's", async () => {
    const applied = { seq: 5 };
    let asked = 0;
    const logEnd: LogEnd = async () => {
      asked++;
      return undefined;
    };
    const replica = new MetadataState(new FakeClock().clock);
    const turns = async (n: number) => {
      for (let i = 0; i < n; i++) await new Promise(setImmediate);
    };
    for (const leading of [true, false]) {
      asked = 0;
      const reads = new StandbyReads(
        100,
        () => applied.seq,
        () => replica,
        logEnd,
      );
      const stop = new AbortController();
      const running = reads.run(stop.signal, () => leading);
      await turns(3);
      expect(asked).toBe(0);
      reads.takes({}, {}); // the first read after a quiet spell: it goes to the leader, and wakes the questions
      await turns(3); // far less than the lag: no timer of lagMs / 2 has run
      expect(asked).toBe(leading ? 0 : 1);
      stop.abort();
      await running;
    }
  });
});
