import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { Change } from "../../../src/core/change.js";
import { MetadataState } from "../../../src/core/state.js";
import { FLUSH_MS, LocalCopy } from "../../../src/replication/local-copy.js";
import { LmdbStore } from "../../../src/store/lmdb-store.js";
import { FakeClock } from "../../support/fake-clock.js";
import { tempDir } from "../../support/temp-dir.js";

const TTL = { reservationTtlMs: 1_000, readLeaseTtlMs: 500, incompleteTtlMs: 60_000 };

/** groups makes n groups of a leader's changes: a rank, then a reservation and a confirmation per group. */
function groups(n: number): (readonly Change[])[] {
  const state = new MetadataState(new FakeClock().clock, TTL);
  state.initializeRank("", 0, 1_000, 1);
  const out: (readonly Change[])[] = [];
  for (let i = 0; i < n; i++) {
    const keys = [`g${i}a`, `g${i}b`];
    const { pages } = state.batchAllocate("", 0, keys);
    state.confirmWrite("", 0, keys, pages);
    out.push(state.takeChanges());
  }
  return out;
}

/** expectRecordsOf expects `store` to hold the records of a store that committed `made` one group at a time. */
async function expectRecordsOf(store: LmdbStore, made: (readonly Change[])[]): Promise<void> {
  const reference = await LmdbStore.open(tempDir());
  for (const group of made) await reference.commit(group);
  expect([...store.stored()]).toEqual([...reference.stored()]);
  await reference.close();
}

describe("a member's local copy", () => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it("writes a standby's groups of one window in one transaction, with the last one's sequence number", async () => {
    const store = await LmdbStore.open(tempDir());
    const copy = new LocalCopy(store);
    const made = groups(5);
    const before = store.transactions();
    for (const [i, group] of made.entries()) copy.add(group, i + 1);
    vi.advanceTimersByTime(FLUSH_MS - 1);
    expect(copy.waiting).toBe(5);
    vi.advanceTimersByTime(1);
    expect(copy.waiting).toBe(0);
    // The window's write is issued: a flush with nothing pending waits for it.
    await copy.flush();
    expect(store.appliedSeq).toBe(5);
    expect(store.transactions() - before).toBe(1);
    await expectRecordsOf(store, made);
    await store.close();
  });

  it("writes at once once maxChanges wait", async () => {
    const store = await LmdbStore.open(tempDir());
    const copy = new LocalCopy(store, { delayMs: FLUSH_MS, maxChanges: 10 });
    const made = groups(3);
    copy.add(made[0]!, 1);
    expect(made[0]!.length + made[1]!.length).toBeGreaterThanOrEqual(10);
    expect(copy.waiting).toBe(1);
    copy.add(made[1]!, 2);
    expect(copy.waiting).toBe(0);
    await copy.flush(); // nothing waits: it resolves once the write already issued is in the store
    expect(store.appliedSeq).toBe(2);
    copy.add(made[2]!, 3);
    expect(copy.waiting).toBe(1);
    await copy.flush();
    await expectRecordsOf(store, made);
    await store.close();
  });

  it("writes the leader's groups in its shorter window, after the groups pending before them, and at once past its few changes", async () => {
    const store = await LmdbStore.open(tempDir());
    const copy = new LocalCopy(store, { delayMs: FLUSH_MS, maxChanges: 1_000 }, { delayMs: 50, maxChanges: 16 });
    const made = groups(5);
    const sizes = made.map((g) => g.length);
    expect(sizes[0]! + sizes[1]!).toBeLessThan(16);
    copy.add(made[0]!, 1);
    const before = store.transactions();
    copy.write(made[1]!, 2);
    vi.advanceTimersByTime(49);
    expect(copy.waiting).toBe(2);
    vi.advanceTimersByTime(1);
    expect(copy.waiting).toBe(0);
    await copy.flush();
    expect(store.transactions() - before).toBe(1);
    expect(store.appliedSeq).toBe(2);
    expect([sizes[2]! + sizes[3]! < 16, sizes[2]! + sizes[3]! + sizes[4]! >= 16]).toEqual([true, true]);
    copy.write(made[2]!, 3);
    copy.write(made[3]!, 4);
    expect(copy.waiting).toBe(2);
    copy.write(made[4]!, 5);
    expect(copy.waiting).toBe(0);
    await copy.flush();
    expect(store.appliedSeq).toBe(5);
    expect(copy.storedSeq).toBe(5);
    await expectRecordsOf(store, made);
    await store.close();
  });

  it("skips the leader's groups while a standby keeps them, then writes its state whole at the entry the log gives, and the groups after it", async () => {
    const store = await LmdbStore.open(tempDir());
    const copy = new LocalCopy(store, undefined, { delayMs: 50, maxChanges: 2_000 });
    const state = new MetadataState(new FakeClock().clock, TTL);
    state.initializeRank("", 0, 1_000, 1);
    const made: (readonly Change[])[] = [state.takeChanges()];
    const next = (i: number) => {
      const keys = [`g${i}a`, `g${i}b`];
      state.confirmWrite("", 0, keys, state.batchAllocate("", 0, keys).pages);
      made.push(state.takeChanges());
      return made.at(-1)!;
    };
    copy.write(made[0]!, 1);
    copy.write(next(2), 2);
    await copy.flush();
    copy.skip();
    copy.write(next(3), 3);
    copy.write(next(4), 4);
    await copy.flush();
    expect(copy.skipping).toBe(true);
    expect(store.appliedSeq).toBe(2);

    // The term ends before the log gives the entry: nothing is written, the store stays a true state at entry 2.
    await expect(copy.rewrite(state.records(), Promise.reject(new Error("the term ended")))).rejects.toThrow("the term ended");
    expect(copy.skipping).toBe(true);
    expect(store.appliedSeq).toBe(2);
    await expectRecordsOf(store, made.slice(0, 2));

    let give!: (seq: number) => void;
    const rewritten = copy.rewrite(state.records(), new Promise<number>((resolve) => (give = resolve)));
    copy.write(made[3]!, 4); // the cut's group, appended while the records were listed: they hold it
    copy.write(next(5), 5);
    give(4);
    await rewritten;
    expect(copy.current).toBe(true);
    copy.write(next(6), 6);
    await copy.flush();
    expect(store.appliedSeq).toBe(6);
    await expectRecordsOf(store, made);
    await store.close();
  });
});
