import type { Change } from "../core/index.js";
import type { LmdbStore } from "../store/lmdb-store.js";

/** FLUSH_MS is how long a member's local copy may lag the groups it applied. */
export const FLUSH_MS = 250;

/** FLUSH_CHANGES starts a write at once when this many changes wait, however young, so that a burst's write stays bounded. */
export const FLUSH_CHANGES = 100_000;

/**
 * LocalCopy writes the log's groups to a member's local store, in log
 * order, each write whole groups with the last one's sequence number, so
 * the store always stands at a group boundary. A standby `add`s the groups
 * it applies: those of up to FLUSH_MS go in one transaction. The store
 * acknowledges nothing (the log in etcd does), so it may lag; after a
 * crash the member catches up from the store's applied entry. One
 * transaction per window instead of one per group writes each B-tree page
 * it touches, and syncs, once per window. The leader `write`s each group
 * it appended at once: a window's write would hold its event loop, and the
 * calls it serves, for the whole window's changes.
 */
export class LocalCopy {
  private pending: (readonly Change[])[] = [];
  private pendingChanges = 0;
  private pendingSeq = 0;
  private timer: NodeJS.Timeout | undefined;
  private tail: Promise<void> = Promise.resolve();

  constructor(
    private readonly store: LmdbStore,
    private readonly limits = { delayMs: FLUSH_MS, maxChanges: FLUSH_CHANGES },
  ) {}

  /** storedSeq is the last log entry the store holds (written groups only; pending ones are not in it yet). */
  get storedSeq(): number {
    return this.store.appliedSeq;
  }

  /** waiting is the number of groups not yet handed to the store. */
  get waiting(): number {
    return this.pending.length;
  }

  /** add takes the group that ends at log entry `seq`; it reaches the store within the window (delayMs), or at once once maxChanges wait. */
  add(changes: readonly Change[], seq: number): void {
    this.pending.push(changes);
    this.pendingChanges += changes.length;
    this.pendingSeq = seq;
    if (this.pendingChanges >= this.limits.maxChanges) void this.flush().catch(() => undefined);
    else this.timer ??= setTimeout(() => void this.flush().catch(() => undefined), this.limits.delayMs);
  }

  /** write writes the group that ends at log entry `seq` now, after every pending one. */
  write(changes: readonly Change[], seq: number): void {
    this.pending.push(changes);
    this.pendingSeq = seq;
    void this.flush().catch(() => undefined);
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
