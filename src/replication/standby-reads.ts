import type { CallOptions } from "@grpc/grpc-js";
import type { StateReads } from "../core/index.js";
import { MIN_POSITION, SHARD_LOCAL_HEADER } from "../protocol/headers.js";
import { Notifier } from "../service/notifier.js";
import type { LogEnd } from "./log-end.js";
import { sleep } from "./sleep.js";
import { attempts } from "./within.js";

/** StandbyReadCounts are a standby's reads since it started: answered here, forwarded for lag, forwarded for a minimum position not yet applied. */
export interface StandbyReadCounts {
  local: number;
  lagging: number;
  behind: number;
}

type Headers = Record<string, string | string[] | undefined>;

/** ASKING_MS is how long after its last read a standby keeps asking etcd whether it holds the log's end. */
const ASKING_MS = 10_000;

/** Decision is how a standby takes one read: here, or to the leader (for lag, or for a position not applied yet, MIN_POSITION). */
interface Decision {
  here: boolean;
  /** counted is the outcome the read is counted under (StandbyReadCounts), moved to local if it is answered here after all. */
  counted: keyof StandbyReadCounts;
  /** min is the position the read needs: its own MIN_POSITION, or the last write this standby passed to the leader. */
  min: number;
  /** foreign is a read whose MIN_POSITION may be another shard's log's (a whole call, in a cluster of shards): the leader answers it. */
  foreign: boolean;
}

/**
 * StandbyReads lets a standby answer reads (BatchExists, GetStats) from the
 * state it replays while it is known to hold the log's end within lagMs
 * (--standby-read-lag): every lagMs / 2, while reads come and it follows
 * (run), it asks etcd (a linearizable read) for the log's last entry;
 * once it applied that far (at once, or within lagMs), every write
 * acknowledged before that question was sent is in its state. A read is
 * answered here when that last happened within lagMs and the position it
 * needs is applied: its MIN_POSITION, and the last write this standby
 * passed to the leader (so a client that writes and reads through one
 * standby reads its writes). A read decided once, when it arrives; one
 * whose position is not applied yet waits for it up to lagMs (catchUp),
 * then goes to the leader. In a cluster of shards each shard has its own
 * log, so a MIN_POSITION holds here only on a shard's own part (a relay's
 * or a routing client's, marked SHARD_LOCAL_HEADER); on a whole call,
 * which a client that does not route may send with any shard's position,
 * the read goes to the leader.
 */
export class StandbyReads {
  private freshSentAt = Number.NEGATIVE_INFINITY;
  private lastReadAt = Number.NEGATIVE_INFINITY;
  private written = 0;
  private readonly decided = new WeakMap<object, Decision>();
  private readonly appliedNotice = new Notifier();
  private readonly readNotice = new Notifier();
  readonly counts: StandbyReadCounts = { local: 0, lagging: 0, behind: 0 };

  constructor(
    readonly lagMs: number,
    private readonly appliedSeq: () => number,
    private readonly replica: () => StateReads | undefined,
    private readonly logEnd: LogEnd,
    /** split is a cluster of more than one shard. */
    private readonly split = false,
  ) {}

  /** staleMs is how long ago this member last knew it held the log's end (Infinity: never). */
  staleMs(): number {
    return performance.now() - this.freshSentAt;
  }

  /** applied hears that the replayed state applied another group of the log. */
  applied(): void {
    this.appliedNotice.notify();
  }

  /** wrote hears of the position of a write this standby passed to the leader (its answer's LOG_POSITION). */
  wrote(position: number): void {
    if (position > this.written) this.written = position;
  }

  /** takes tells whether this member answers a read (READS, in any framing) itself now: decided once per request, and counted. */
  takes(request: object, headers: Headers): boolean {
    return this.decide(request, headers).here && this.replica() !== undefined;
  }

  /**
   * catchUp waits, up to lagMs, for a read that needs a position not
   * applied yet (a write it follows); true once it is, and the read is
   * then answered here. False at once for any other request.
   */
  async catchUp(request: object): Promise<boolean> {
    const decision = this.decided.get(request);
    if (decision === undefined || decision.here || decision.foreign || decision.min === 0) return false;
    const until = AbortSignal.timeout(this.lagMs);
    while (this.appliedSeq() < decision.min && !until.aborted) await this.appliedNotice.next(until);
    if (this.appliedSeq() < decision.min || !this.fresh()) return false;
    decision.here = true;
    this.counts[decision.counted]--;
    this.counts.local++;
    decision.counted = "local";
    return true;
  }

  private fresh(): boolean {
    return this.lagMs > 0 && this.replica() !== undefined && this.staleMs() <= this.lagMs;
  }

  private decide(request: object, headers: Headers): Decision {
    let decision = this.decided.get(request);
    if (decision !== undefined) return decision;
    this.lastReadAt = performance.now();
    this.readNotice.notify();
    const min = minPosition(headers);
    const foreign = this.split && min > 0 && headers[SHARD_LOCAL_HEADER] === undefined;
    decision = { here: false, counted: "local", min: Math.max(min, this.written), foreign };
    if (foreign) decision.counted = "behind";
    else if (!this.fresh()) decision.counted = "lagging";
    else if (this.appliedSeq() < decision.min) decision.counted = "behind";
    else decision.here = true;
    this.counts[decision.counted]++;
    this.decided.set(request, decision);
    return decision;
  }

  /**
   * run asks etcd where the log ends past the applied entry, every
   * lagMs / 2, until signal aborts; off when lagMs is 0. It asks only while
   * this member follows and reads came in the last ASKING_MS (asking all
   * the time cost an idle member several times its other work:
   * docs/performance.md), and otherwise sleeps until the next read: the
   * first read after a quiet spell goes to the leader while the standby
   * learns where it stands, at once.
   */
  async run(signal: AbortSignal, leading: () => boolean): Promise<void> {
    if (this.lagMs <= 0) return;
    while (!signal.aborted) {
      if (leading() || performance.now() - this.lastReadAt > ASKING_MS) {
        // Idle, it sleeps until a read comes (no read reaches a leader here): a timer every lagMs / 2 cost an idle leader about a quarter of its CPU (docs/performance.md).
        await this.readNotice.next(signal);
        continue;
      }
      const sentAt = performance.now();
      const applied = this.appliedSeq();
      try {
        // The log's last entry past the applied one, if any: a write acknowledged before sentAt is at or before it.
        const end = (await attempts(this.lagMs, (options: CallOptions) => this.logEnd(applied + 1, options))) ?? applied;
        // Under steady writes the log has always moved on by the time etcd answers: wait (within the lag) to apply as far as it was.
        if (this.appliedSeq() < end) {
          const within = AbortSignal.any([signal, AbortSignal.timeout(Math.ceil(Math.max(1, this.lagMs - (performance.now() - sentAt))))]);
          while (this.appliedSeq() < end && !within.aborted) await this.appliedNotice.next(within);
        }
        if (this.appliedSeq() >= end) this.freshSentAt = Math.max(this.freshSentAt, sentAt);
      } catch {
        // Unanswered: the reads go to the leader once the last answer is lagMs old.
      }
      await sleep(Math.max(1, this.lagMs / 2 - (performance.now() - sentAt)), signal);
    }
  }
}

/** minPosition reads MIN_POSITION (0 when absent or not a position). */
function minPosition(headers: Headers): number {
  const value = headers[MIN_POSITION];
  const position = Number(Array.isArray(value) ? value[0] : value);
  return Number.isSafeInteger(position) && position > 0 ? position : 0;
}
