import { MetadataError, Reason } from "../core/index.js";
import type { RequestBody } from "./body-reader.js";
import { Notifier } from "./notifier.js";

/** ReadGate decides whether a standby answers a read itself (StandbyReads, src/replication/standby-reads.ts), once per request. */
export interface ReadGate {
  /** takes tells whether this member answers a read itself (decided once per request). */
  takes(request: object, headers: RequestBody["headers"]): boolean;
  /** catchUp waits briefly for a read that follows a write not applied yet; true: it is answered here now. */
  catchUp(request: object): Promise<boolean>;
  /** wrote hears of a write passed to the leader, by its answer's log position. */
  wrote(position: number): void;
}

/**
 * Leadership says whether this member of a highly available cluster
 * (--etcd-endpoints) answers MetadataService calls: only while it leads.
 * A standby refuses them with NOT_LEADER naming the leader, and is
 * "caught up" once its store holds the log up to its end (health: the
 * server is SERVING then). The edge checks it on every call; the member
 * (src/replication/member.ts) moves it.
 */
export class Leadership {
  private current: MetadataError | undefined = notLeader("");
  private caught = false;
  private leaseValid: () => boolean = () => false;
  private readonly notifier = new Notifier();
  /** leaderlessSince is when this member last came to know no leader (now(), ms); undefined while it leads or names one. */
  private leaderlessSince: number | undefined;

  /**
   * @param readHoldMs is how long this member may know no leader before
   *   it answers lookups as misses (--read-hold; 0: never).
   * @param now reads a monotonic clock in ms.
   */
  constructor(
    private readonly readHoldMs = 0,
    private readonly now: () => number = () => performance.now(),
  ) {
    this.leaderlessSince = now();
  }

  /**
   * refusal is the error of a call while this member does not lead;
   * undefined while it leads and its lease is valid. The lease is read at
   * every call: a leader that was paused refuses as soon as it wakes, before
   * any timer of its own has run.
   */
  get refusal(): MetadataError | undefined {
    if (this.current === undefined && !this.leaseValid()) return LEASE_LAPSED;
    return this.current;
  }

  /** reads lets a standby answer the reads it holds fresh; undefined: it answers none. */
  reads: ReadGate | undefined;

  /** refusalFor is the refusal of one call: none for a read (READS) that this member, a standby, answers itself (ReadGate). */
  refusalFor(read: boolean, request: RequestBody): MetadataError | undefined {
    const refusal = this.refusal;
    if (refusal === undefined || !read || this.reads === undefined) return refusal;
    return this.reads.takes(request, request.headers) ? undefined : refusal;
  }

  /** leaderless is true while this member does not lead and knows no leader: calls then wait for one (Edge) rather than fail. */
  get leaderless(): boolean {
    return this.refusal?.subject.leaderUrl === "";
  }

  /**
   * lookupsMissedInMs is how long from now this member answers lookups
   * (LOOKUPS) as misses: 0 once it has known no leader for --read-hold
   * (etcd out of reach, or no member able to lead), so that engines, which
   * wait on them without a deadline, recompute instead of stopping;
   * Infinity while it leads or names a leader, or with --read-hold 0.
   */
  lookupsMissedInMs(): number {
    if (this.leaderlessSince === undefined || this.readHoldMs <= 0 || !this.leaderless) return Number.POSITIVE_INFINITY;
    return Math.max(0, this.leaderlessSince + this.readHoldMs - this.now());
  }

  /** missesLookups is true while this member answers lookups as misses: it has known no leader for --read-hold (lookupsMissedInMs). */
  get missesLookups(): boolean {
    return this.lookupsMissedInMs() === 0;
  }

  /** caughtUp is true while this member leads, or follows with the log applied to its end. */
  get caughtUp(): boolean {
    return this.caught;
  }

  /** lead opens the member to calls while leaseValid() holds. */
  lead(leaseValid: () => boolean): void {
    this.leaseValid = leaseValid;
    this.current = undefined;
    this.caught = true;
    this.leaderlessSince = undefined;
    this.notifier.notify();
  }

  /** follow closes the member to calls, naming the leader ("" when unknown). */
  follow(leaderUrl: string, caughtUp: boolean): void {
    if (this.current?.subject.leaderUrl === leaderUrl && this.caught === caughtUp) return;
    if (leaderUrl !== "") this.leaderlessSince = undefined;
    else if (this.current?.subject.leaderUrl !== "") this.leaderlessSince = this.now();
    this.current = notLeader(leaderUrl);
    this.caught = caughtUp;
    this.notifier.notify();
  }

  /** next resolves at the next change, or when signal aborts. */
  next(signal: AbortSignal): Promise<void> {
    return this.notifier.next(signal);
  }
}

/** LEASE_LAPSED is the refusal of a leader whose lease lapsed before it noticed. */
const LEASE_LAPSED = new MetadataError(Reason.NOT_LEADER, "this member's leadership lapsed: retry shortly, or on another member", { leaderUrl: "" });

/** notLeader is the refusal of a standby. */
function notLeader(leaderUrl: string): MetadataError {
  const where = leaderUrl === "" ? "no leader is known yet: retry shortly, or on another member" : `retry on the leader at ${leaderUrl}`;
  return new MetadataError(Reason.NOT_LEADER, `this member of the cluster is a standby: ${where}`, { leaderUrl });
}
