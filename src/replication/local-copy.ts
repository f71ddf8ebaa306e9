import type { Change } from "../core/index.js";
import type { LmdbStore } from "../store/lmdb-store.js";

/** FLUSH_MS is how long a member's local copy may lag the groups it applied. */
export const FLUSH_MS = 250;

/** FLUSH_CHANGES starts a write at once when this many changes wait, however young, so that a burst's write stays bounded. */
export const FLUSH_CHANGES = 100_000;

/** LEADER_WINDOW is the leader's: short, and few changes, since its write holds the event loop its calls need while it encodes them. */
export const LEADER_WINDOW: Window = { delayMs: 50, maxChanges: 2_000 };

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
 */
export class LocalCopy {
  private pending: (readonly Change[])[] = [];
  private pendingChanges = 0;
  private pendingSeq = 0;
  private timer: NodeJS.Timeout | undefined;
  /** due is when the timer fires (performance.now()). */
  private due = 0;
  private tail: Promise<void> = Promise.resolve();

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

  /** write takes the leader's group that ends at log entry `seq`, after every pending one, in the leader's window. */
  write(changes: readonly Change[], seq: number): void {
    this.take(changes, seq, this.leaderLimits);
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
