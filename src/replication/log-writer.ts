import type { Logger } from "pino";
import type { Change } from "../core/index.js";
import { MetadataError, Reason } from "../core/index.js";
import type { ClusterKeys } from "./cluster-keys.js";
import type { EtcdSession } from "./etcd-session.js";
import type { LocalCopy } from "./local-copy.js";
import type { LogAppend } from "./log-append.js";
import { encodeGroup, splitGroup } from "./log-codec.js";

/**
 * LINGER_MS is how long an append waits for more commits while the last
 * RECENT commits came less than GATHERING_GAP_MS apart on average: under
 * load, calls share appends, which cost the leader most of its CPU beyond
 * a single node's (docs/performance.md); at a slower pace the wait would
 * seldom gather a call, and would cost each answer its 2 ms and the
 * leader a wake-up.
 */
const LINGER_MS = 2;
const GATHERING_GAP_MS = 8;
const RECENT = 4;

/** SLOW_APPEND_MS is how long an append may take before the leader logs it: half a failover, when calls start to wait long. */
const SLOW_APPEND_MS = 1_000;

interface Pending {
  changes: readonly Change[];
  resolve(): void;
  reject(error: Error): void;
  /** cut ends a group: the commits queued after it go in a later one (LogWriter.cut). */
  cut?: true;
}

/**
 * LogWriter is a leader's side of the replicated log for one term. It
 * commits like a store: the changes of every call that commits while an
 * append is in flight, or while it lingers (LINGER_MS), form the next
 * group (group commit), appended in one
 * etcd transaction per part, each guarded by `create_revision(leader key)
 * == the term's` (fencing: a deposed leader's append fails) and by the
 * entry's key being new. A call's commit resolves once its group is in
 * etcd and the lease is still trusted, so a leader paused past its lease
 * acknowledges nothing; the group then goes to the local store.
 *
 * Any failure ends the term at once: every pending commit is rejected with
 * NOT_LEADER (nothing of it was acknowledged), and `lost` resolves. The
 * state that made those changes must then be dropped: it is ahead of the
 * log.
 */
export class LogWriter {
  private queue: Pending[] = [];
  /** last is the commit issued last (settled once it and every earlier one are in the log, or failed). */
  private last: Promise<void> = Promise.resolve();
  private appending = false;
  /** recent are when the last RECENT commits came (performance.now()), oldest first. */
  private readonly recent: number[] = [];
  private failure: MetadataError | undefined;
  private onLost!: (error: MetadataError) => void;
  /** lost resolves with the cause once the term ended. */
  readonly lost = new Promise<MetadataError>((resolve) => (this.onLost = resolve));

  constructor(
    /** append sends one fenced append (LogAppend: etcd3's client, or a lean one). */
    private readonly appendEntry: LogAppend,
    private readonly keys: ClusterKeys,
    private readonly session: EtcdSession,
    /** termRevision is the create_revision of the leader key this member put. */
    private readonly termRevision: string,
    private nextSeq: number,
    private readonly local: LocalCopy,
    /** logger hears of appends slower than SLOW_APPEND_MS (etcd electing, an endpoint that stopped answering). */
    private readonly logger?: Pick<Logger, "warn">,
  ) {
    void session.lost.then(() => this.end("its etcd lease lapsed"));
  }

  /** lastSeq is the sequence number of the last entry appended in this term (or before it). */
  get lastSeq(): number {
    return this.nextSeq - 1;
  }

  /**
   * commit resolves once `changes` and every earlier commit are in the log;
   * see the class comment. A call that changed nothing (a read) waits only
   * for the commits before it: its answer may show their changes.
   */
  commit(changes: readonly Change[]): Promise<void> {
    if (this.failure !== undefined) return Promise.reject(this.failure);
    if (changes.length === 0) return this.afterPending();
    if (this.recent.push(performance.now()) > RECENT) this.recent.shift();
    const done = new Promise<void>((resolve, reject) => {
      this.queue.push({ changes, resolve, reject });
      if (!this.appending) void this.appendQueued();
    });
    this.last = done;
    return done;
  }

  /**
   * cut ends the group being gathered after the commits issued so far, and
   * resolves with the log entry that group ends at once it is in the log
   * (rejects if the term ends first): the log up to that entry holds every
   * change committed before the cut, and none committed after it.
   */
  cut(): Promise<number> {
    if (this.failure !== undefined) return Promise.reject(this.failure);
    const seq = new Promise<number>((resolve, reject) => {
      this.queue.push({ changes: [], resolve: () => resolve(this.lastSeq), reject, cut: true });
      if (!this.appending) void this.appendQueued();
    });
    return seq;
  }

  /** afterPending resolves once every commit issued so far is in the log (at once when none is pending), if the lease still holds then. */
  private async afterPending(): Promise<void> {
    await this.last;
    if (!this.session.valid()) throw this.failure ?? new MetadataError(Reason.NOT_LEADER, "this member's leadership lapsed: retry on the leader");
  }

  /** localDone resolves once every group appended so far is in the local store too. */
  localDone(): Promise<void> {
    return this.local.flush().catch(() => undefined);
  }

  /** end ends the term (the member steps down); pending commits are rejected. */
  end(why: string): void {
    if (this.failure !== undefined) return;
    this.failure = new MetadataError(Reason.NOT_LEADER, `this member stopped leading (${why}); the call was not acknowledged: retry on the leader`);
    for (const pending of this.queue.splice(0)) pending.reject(this.failure);
    this.onLost(this.failure);
  }

  private async appendQueued(): Promise<void> {
    this.appending = true;
    if (this.gathering()) await new Promise((resolve) => setTimeout(resolve, LINGER_MS));
    while (this.queue.length > 0 && this.failure === undefined) {
      const cut = this.queue.findIndex((p) => p.cut);
      const batch = this.queue.splice(0, cut < 0 ? this.queue.length : cut + 1);
      const changes = batch.length === 1 ? batch[0]!.changes : batch.flatMap((p) => p.changes);
      try {
        const started = performance.now();
        if (changes.length > 0) await this.append(changes);
        const tookMs = performance.now() - started;
        if (tookMs > SLOW_APPEND_MS)
          this.logger?.warn({ tookMs: Math.round(tookMs), calls: batch.length, lastSeq: this.lastSeq }, "cluster: a slow append to the log");
        if (!this.session.valid()) throw new Error("its etcd lease lapsed before the append was acknowledged");
      } catch (error) {
        this.end((error as Error).message);
        for (const pending of batch) pending.reject(this.failure!);
        break;
      }
      for (const pending of batch) pending.resolve();
    }
    this.appending = false;
  }

  /** gathering is true while commits come fast enough that a linger is likely to gather another (GATHERING_GAP_MS). */
  private gathering(): boolean {
    const n = this.recent.length;
    return n > 1 && (this.recent[n - 1]! - this.recent[0]!) / (n - 1) < GATHERING_GAP_MS;
  }

  /** append puts one group into the log, part by part, then hands it to the local store. */
  private async append(changes: readonly Change[]): Promise<void> {
    const first = this.nextSeq;
    const parts = splitGroup(encodeGroup(changes), first);
    for (const [i, value] of parts.entries()) {
      const key = this.keys.logEntry(first + i);
      // A repeat of an append that landed fails its compare and finds its own entry (below).
      const append = { fence: this.keys.heldBy(this.termRevision), key, value };
      const res = await this.session.call((options) => this.appendEntry(append, options));
      if (!res.succeeded && res.leaderRevision !== this.termRevision) throw new Error("another member leads now (the fenced append was refused)");
      // Only this term writes entries past its first: an entry that exists is this very append, landed on a retry whose first answer was lost.
      if (!res.succeeded && !res.entryExists) throw new Error(`the append of log entry ${first + i} was refused`);
      this.nextSeq = first + i + 1;
    }
    this.local.write(changes, this.nextSeq - 1);
  }
}
