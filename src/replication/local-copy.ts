import { setImmediate } from "node:timers/promises";
import type { Change } from "../core/index.js";
import type { LmdbStore, SnapshotPiece } from "../store/lmdb-store.js";

/** FLUSH_MS is how long a member's local copy may lag the groups it applied. */
export const FLUSH_MS = 250;

/** FLUSH_CHANGES starts a write at once when this many changes wait, however young, so that a burst's write stays bounded. */
export const FLUSH_CHANGES = 100_000;

/** LEADER_WINDOW is the leader's: short, and few changes, since its write holds the event loop its calls need while it encodes them. */
export const LEADER_WINDOW: Window = { delayMs: 50, maxChanges: 2_000 };

/** REWRITE_PIECE is how many records of a leader's state go to its store in one transaction (rewrite): its event loop serves calls between pieces. */
export const REWRITE_PIECE = 10_000;

/** Window bounds how long groups wait to be written together, and how many changes. */
export interface Window {
  readonly delayMs: number;
  readonly maxChanges: number;
}

/**
 * LocalCopy writes the log's groups to a member's local store, in log
 * order, each write whole groups with the last one's sequence number, so
 * the store always stands at a group boundary. A standby `add`s the groups
 * it applies: those of up to FLUSH_MS go in one transaction. The store
 * acknowledges nothing (the log in etcd does), so it may lag; after a
 * crash the member catches up from the store's applied entry. One
 * transaction per window instead of one per group writes each B-tree page
 * it touches, and syncs, once per window. The leader `write`s each group
 * it appended in a window of its own (LEADER_WINDOW), short and of few
 * changes: a standby's window would hold its event loop, and the calls it
 * serves, for the whole window's changes; a transaction per group cost it
 * lmdb-js's start of a write for every group.
 *
 * A leader whose state a caught-up standby keeps on its own disk `skip`s
 * its copy: the log and that standby's store hold every acknowledged
 * change, and the copy was the leader's largest cost after the appends
 * (docs/performance.md). Its store then stands at an earlier entry, which
 * is a true state of the log: a restart catches up from there, or loads a
 * standby's snapshot. When no standby keeps it any more, the leader
 * `rewrite`s its store whole from its state, then copies again.
 */
export class LocalCopy {
  private pending: (readonly Change[])[] = [];
  private pendingChanges = 0;
  private pendingSeq = 0;
  private timer: NodeJS.Timeout | undefined;
  /** due is when the timer fires (performance.now()). */
  private due = 0;
  private tail: Promise<void> = Promise.resolve();
  /** leader is how the leader's groups (write) are kept: all, none, or held while the state is written whole (rewrite). */
  private leader: "copy" | "skip" | "rewrite" = "copy";
  /** held are the leader's groups appended while its state is written whole, to write after it (rewrite). */
  private held: { changes: readonly Change[]; seq: number }[] = [];

  constructor(
    private readonly store: LmdbStore,
    private readonly limits: Window = { delayMs: FLUSH_MS, maxChanges: FLUSH_CHANGES },
    private readonly leaderLimits: Window = LEADER_WINDOW,
  ) {}

  /** storedSeq is the last log entry the store holds (written groups only; pending ones are not in it yet). */
  get storedSeq(): number {
    return this.store.appliedSeq;
  }

  /** waiting is the number of groups not yet handed to the store. */
  get waiting(): number {
    return this.pending.length;
  }

  /** add takes a standby's group that ends at log entry `seq`; it reaches the store within the window (delayMs), or at once once maxChanges wait. */
  add(changes: readonly Change[], seq: number): void {
    this.take(changes, seq, this.limits);
  }

  /** write takes the leader's group that ends at log entry `seq`, after every pending one, in the leader's window; none while it skips. */
  write(changes: readonly Change[], seq: number): void {
    if (this.leader === "copy") this.take(changes, seq, this.leaderLimits);
    else if (this.leader === "rewrite") this.held.push({ changes, seq });
  }

  /** current is true while the store holds the leader's groups within its window (a term starts so: it caught up through the store). */
  get current(): boolean {
    return this.leader === "copy";
  }

  /** skipping is true while the leader writes none of its groups (skip). */
  get skipping(): boolean {
    return this.leader === "skip";
  }

  /** lead starts a term that copies every group: the store holds the log up to the term's first entry. */
  lead(): void {
    this.leader = "copy";
    this.held = [];
  }

  /** skip stops writing the leader's groups (those pending are written); the store stays at the entry it holds. */
  skip(): void {
    if (this.leader === "copy") void this.flush().catch(() => undefined);
    if (this.leader !== "rewrite") this.leader = "skip";
  }

  /**
   * rewrite replaces the store's records with `records`, the leader's
   * state as the log holds it up to the entry `at` gives (LogWriter.cut),
   * then copies again: groups up to that entry are in the records, later
   * ones are held meanwhile and written after. Nothing is written if `at`
   * rejects (the term ended: the store keeps its earlier entry). The
   * records go REWRITE_PIECE to a transaction, one event turn each, as a
   * snapshot loads (LmdbStore.loadSnapshot: a crash midway leaves a store
   * that loads a snapshot again).
   */
  async rewrite(records: readonly Change[], at: Promise<number>): Promise<void> {
    this.leader = "rewrite";
    this.held = [];
    let seq: number;
    try {
      seq = await at;
      const written = this.tail.then(() => this.store.loadSnapshot(pieces(records, seq)));
      this.tail = written.then(noop, noop);
      await written;
    } catch (error) {
      // The term ended (nothing written), or the write failed (the store loads a snapshot again, its mark): the next look tries again.
      this.leader = "skip";
      this.held = [];
      throw error;
    }
    const held = this.held.filter((group) => group.seq > seq);
    this.leader = "copy";
    this.held = [];
    for (const group of held) this.take(group.changes, group.seq, this.leaderLimits);
  }

  private take(changes: readonly Change[], seq: number, window: Window): void {
    this.pending.push(changes);
    this.pendingChanges += changes.length;
    this.pendingSeq = seq;
    if (this.pendingChanges >= window.maxChanges) {
      void this.flush().catch(() => undefined);
      return;
    }
    const due = performance.now() + window.delayMs;
    if (this.timer !== undefined && this.due <= due) return;
    clearTimeout(this.timer);
    this.due = due;
    this.timer = setTimeout(() => void this.flush().catch(() => undefined), window.delayMs);
  }

  /** flush writes every pending group now; it resolves once the store holds every group added so far (it rejects if the store failed). */
  flush(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.pending.length > 0) {
      const changes = this.pending.length === 1 ? this.pending[0]! : this.pending.flat();
      const commit = this.store.commitApplied(changes, this.pendingSeq);
      this.pending = [];
      this.pendingChanges = 0;
      this.tail = this.tail.then(() => commit);
    }
    return this.tail;
  }
}

/** noop is a handler that does nothing. */
function noop(): void {}

/** pieces hands records to a store's load REWRITE_PIECE at a time, each after an event turn, all at log entry `seq`. */
async function* pieces(records: readonly Change[], seq: number): AsyncGenerator<SnapshotPiece> {
  for (let at = 0; at === 0 || at < records.length; at += REWRITE_PIECE) {
    if (at > 0) await setImmediate();
    yield { appliedSeq: seq, records: records.slice(at, at + REWRITE_PIECE), total: records.length };
  }
}
