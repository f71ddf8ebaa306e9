import type { Etcd3, IKeyValue } from "etcd3";
import type { Change } from "../core/index.js";
import type { ClusterKeys } from "./cluster-keys.js";
import type { LocalCopy } from "./local-copy.js";
import { decodePart, GroupAssembler } from "./log-codec.js";
import { type Watches, watchAfter } from "./watch.js";
import { attempts } from "./within.js";

/** RENEW_MS is how long one watch of the log is kept before it is renewed. */
const RENEW_MS = 10_000;

/** RANGE_ENTRIES is how many log entries one catch-up read asks for (each at most PART_BYTES). */
const RANGE_ENTRIES = 32;

/** LogGapError says the log no longer holds the entries after this member's applied one: it needs a snapshot. */
export class LogGapError extends Error {
  override name = "LogGapError";
}

/**
 * LogReader applies the replicated log to a member's local store (through
 * its LocalCopy, which records the applied sequence number with the
 * groups), in sequence order, a group at a time (log-codec.ts). `catchUp`
 * reads to the log's end; `follow` catches up, then watches for new
 * entries until stopped. A standby follows; a new leader catches up
 * before it serves. Each group also goes, in log order, to `applied` (the
 * member's hot standby state), as it goes to the store.
 */
export class LogReader {
  /** seenSeq is the last entry read (an unfinished group's parts included); the next read starts after it. */
  private seenSeq: number;
  private groups = new GroupAssembler();

  constructor(
    private readonly client: Etcd3,
    private readonly watches: Watches,
    private readonly keys: ClusterKeys,
    private readonly local: LocalCopy,
    private readonly applied: (changes: readonly Change[]) => void,
  ) {
    this.seenSeq = local.storedSeq;
    this.appliedSeq = this.seenSeq;
  }

  /** appliedSeq is the last entry whose group was applied (it reaches the local store within FLUSH_MS). */
  appliedSeq: number;

  /** restart forgets what was read beyond the store's applied entry (an unfinished group), after a leader's term or a snapshot, once the store holds every group added. */
  restart(): void {
    this.seenSeq = this.appliedSeq = this.local.storedSeq;
    this.groups = new GroupAssembler();
  }

  /**
   * catchUp applies every entry after seenSeq up to the log's end, and
   * resolves once the local store holds them, with the etcd revision it
   * read at and the last sequence number in the log. Throws LogGapError
   * when the entry after seenSeq was compacted away.
   */
  async catchUp(deadlineMs = 10_000): Promise<{ revision: string; lastSeq: number }> {
    for (;;) {
      // Up to RANGE_ENTRIES entries of 1 MB: an attempt may take the whole deadline, and is made again on another endpoint if it fails.
      const res = await attempts(
        deadlineMs,
        (options) => this.client.kv.range({ key: this.keys.logEntry(this.seenSeq + 1), range_end: this.keys.logEnd, limit: RANGE_ENTRIES }, options),
        deadlineMs,
      );
      for (const kv of res.kvs) this.apply(kv);
      if (!res.more) {
        await this.local.flush();
        return { revision: res.header.revision, lastSeq: this.seenSeq };
      }
    }
  }

  /**
   * follow watches the log from the revision after `revision`, applying
   * each new entry, until `stop` resolves or RENEW_MS passed (it resolves:
   * the caller catches up and follows again), or the watch ends (it
   * rejects).
   */
  async follow(revision: string, stop: Promise<void>): Promise<void> {
    let ended!: (error: Error) => void;
    const failed = new Promise<never>((_, reject) => (ended = reject));
    // The watch may end (etcd's stream fails) before open() returns, when nothing awaits `failed` yet: handled from the start, raced below.
    failed.catch(() => undefined);
    const close = await this.watches.open((client) => watchAfter(client.watch().prefix(this.keys.log).only("put"), revision), {
      put: (kv) => this.apply(kv),
      ended,
    });
    let timer: NodeJS.Timeout | undefined;
    // A watch is renewed (after a read of the log) every RENEW_MS: a watch that went silent without a word costs at most that.
    const renew = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, RENEW_MS);
    });
    try {
      await Promise.race([stop, failed, renew]);
    } finally {
      clearTimeout(timer);
      await close();
      await this.local.flush();
    }
  }

  /** stored resolves once every group applied so far is in the local store. */
  stored(): Promise<void> {
    return this.local.flush();
  }

  /** apply takes one log entry: a group it completes goes to the store. Entries already read are skipped; a gap throws LogGapError. */
  private apply(kv: IKeyValue): void {
    const seq = this.keys.seqOf(kv.key);
    if (seq <= this.seenSeq) return;
    if (seq !== this.seenSeq + 1) throw new LogGapError(`log entry ${this.seenSeq + 1} was compacted away (the oldest kept is ${seq})`);
    this.seenSeq = seq;
    const changes: Change[] | undefined = this.groups.add(seq, decodePart(kv.value));
    if (changes === undefined) return;
    this.appliedSeq = seq;
    this.applied(changes);
    this.local.add(changes, seq);
  }
}
