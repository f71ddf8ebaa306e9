import { randomUUID } from "node:crypto";
import type { Etcd3 } from "etcd3";
import type { Logger } from "pino";
import type { Change } from "../core/change.js";
import type { Clock } from "../core/clock.js";
import { MetadataError, Reason } from "../core/errors.js";
import { ReplayState } from "../core/replay-state.js";
import { MetadataState } from "../core/state.js";
import type { StateOptions } from "../core/state-options.js";
import type { Leadership } from "../service/leadership.js";
import type { LmdbStore } from "../store/lmdb-store.js";
import { loadState } from "../store/load-state.js";
import { ClusterKeys, type LeaderRecord, type MemberRecord } from "./cluster-keys.js";
import { LocalCopy } from "./local-copy.js";
import { LogGapError, LogReader } from "./log-reader.js";
import { LogWriter } from "./log-writer.js";
import { MemberLease } from "./member-lease.js";
import { ReplicatedStore } from "./replicated-store.js";
import { fetchSnapshot } from "./replication-service.js";
import { type Watches, watchAfter } from "./watch.js";
import { within } from "./within.js";

/** MemberOptions configure a member of a highly available cluster. */
export interface MemberOptions {
  clusterName: string;
  /** leaderLeaseMs is the TTL of the member's etcd lease (whole seconds in etcd). */
  leaderLeaseMs: number;
  /** state options of the MetadataState the member keeps as a standby and serves when it leads. */
  state: StateOptions;
  clock: Clock;
  /** logRetainEntries is how many of the last log entries are kept even once every member applied them, so a member back from a short outage catches up from the log. Defaults to 1,000. */
  logRetainEntries?: number;
  /** maxLogEntries bounds the log: older entries are deleted even if a member has not applied them (it then loads a snapshot). Defaults to 10,000. */
  maxLogEntries?: number;
  /** token is sent to the leader when this member asks it for a snapshot (servers with token files need an admin token). */
  token?: string;
}

/** PUBLISH_MS is how often a member refreshes its record (applied entry, role). */
const PUBLISH_MS = 500;
/** COMPACT_MS is how often a leader deletes log entries that every member applied. */
const COMPACT_MS = 2_000;
/** LEADER_RECHECK_MS is how often a standby reads the leader key even when its watch says nothing. */
const LEADER_RECHECK_MS = 2_000;
/** RETRY_MS is the pause before a member tries etcd again after a failure. */
const RETRY_MS = 250;

/**
 * Member is one server of a highly available cluster on etcd. Members
 * campaign for one leader key, each with its own lease (MemberLease). The
 * leader serves: before it does, it applies the log up to its end, then
 * takes over its hot state; then it appends each group commit to the log,
 * fenced (LogWriter). A standby applies the log to its store and to a hot
 * state (LogReader, ReplayState), which it loaded from its store
 * when it began to follow, and refuses calls with NOT_LEADER naming the
 * leader (Leadership). A leader whose lease lapses or whose append fails
 * drops its state and follows again (loading a hot state anew).
 */
export class Member {
  readonly keys: ClusterKeys;
  /** ledger is the state this member serves (empty unless it leads) and its store. */
  readonly ledger: { state: MetadataState; readonly store: ReplicatedStore };
  private readonly reader: LogReader;
  /** copy writes the groups applied or appended to the local store, a window at a time. */
  private readonly copy: LocalCopy;
  /** hot is the standby's state, equal to the log at the applied entry, that it takes over when it leads; undefined until (re)loaded. */
  private hot: ReplayState | undefined;
  private writer: LogWriter | undefined;
  private leaderUrl = "";
  private advertiseUrl = "";
  /** compactedBelow is the first log entry this leader's compaction kept; entries below it are gone. */
  private compactedBelow = 1;
  private closed = false;
  private readonly stop = new AbortController();
  /** closing resolves, once, when the member starts shutting down. */
  private readonly closing = new Promise<string>((resolve) =>
    this.stop.signal.addEventListener("abort", () => resolve("the member is shutting down"), { once: true }),
  );
  private running: Promise<void> = Promise.resolve();

  private constructor(
    private readonly client: Etcd3,
    private readonly watches: Watches,
    readonly local: LmdbStore,
    readonly clusterId: string,
    readonly leadership: Leadership,
    private readonly options: MemberOptions,
    private readonly logger: Logger,
  ) {
    this.keys = new ClusterKeys(options.clusterName);
    this.copy = new LocalCopy(local);
    this.reader = new LogReader(client, watches, this.keys, this.copy, (changes) => this.replay(changes));
    this.ledger = { state: new MetadataState(options.clock, options.state), store: new ReplicatedStore(this, clusterId, local, [client, watches]) };
  }

  /**
   * join checks that the local store belongs to the cluster (or is new and
   * empty), and returns a member that starts campaigning and following with
   * `start`. The state in `ledger` is empty until the member leads.
   */
  static async join(client: Etcd3, watches: Watches, local: LmdbStore, leadership: Leadership, options: MemberOptions, logger: Logger): Promise<Member> {
    const keys = new ClusterKeys(options.clusterName);
    const clusterId = await ensureClusterId(client, keys).catch((error: Error) => {
      throw new Error(`cannot reach etcd to join cluster "${options.clusterName}": ${error.message}`);
    });
    if (local.clusterId === undefined) {
      if (!local.isEmpty()) {
        throw new Error(`the data dir ${local.path} holds a single-node store; a member of cluster "${options.clusterName}" starts from an empty data dir`);
      }
      await local.joinCluster(clusterId);
    } else if (local.clusterId !== clusterId) {
      throw new Error(
        `the data dir ${local.path} belongs to another cluster (${local.clusterId}), not to "${options.clusterName}" (${clusterId}) on these etcd endpoints`,
      );
    }
    return new Member(client, watches, local, clusterId, leadership, options, logger);
  }

  /** clusterName is the cluster's name (--cluster-name). */
  get clusterName(): string {
    return this.options.clusterName;
  }

  /** memberId is this member's id: its data dir's server id. */
  get memberId(): string {
    return this.local.serverId;
  }

  /** appliedSeq is the last log entry this member applied (or appended); its store holds it within FLUSH_MS. */
  get appliedSeq(): number {
    return this.writer?.lastSeq ?? this.reader.appliedSeq;
  }

  /** start runs the member's terms in the background until close; advertiseUrl is how clients and the other members reach it. */
  start(advertiseUrl: string): void {
    this.advertiseUrl = advertiseUrl;
    this.running = this.run();
  }

  /** commit is the leader's commit of a call's changes; refused with NOT_LEADER on a standby. */
  commit(changes: readonly Change[]): Promise<void> {
    if (this.writer === undefined) return Promise.reject(this.leadership.refusal ?? new MetadataError(Reason.NOT_LEADER, "not leading"));
    return this.writer.commit(changes);
  }

  /** close steps down (revoking the lease, so another member leads at once) and stops. */
  async close(): Promise<void> {
    this.closed = true;
    this.stop.abort();
    await this.running;
  }

  /** run campaigns and follows, term after term, until close. */
  private async run(): Promise<void> {
    while (!this.closed) {
      try {
        await this.term();
      } catch (error) {
        if (this.closed) break;
        this.logger.warn({ err: (error as Error).message }, "cluster: etcd failed; retrying");
        this.leadership.follow(this.leaderUrl, false);
        await sleep(RETRY_MS, this.stop.signal);
      }
    }
  }

  /** term runs on one lease: follow the log, campaign when no one leads, lead when elected; it ends when the lease lapses. */
  private async term(): Promise<void> {
    const lease = await MemberLease.grant(this.client, this.options.leaderLeaseMs);
    const publisher = setInterval(() => void this.publish(lease), PUBLISH_MS);
    try {
      await this.publish(lease);
      while (lease.valid() && !this.closed) {
        const following = new AbortController();
        const follower = this.followLog(following.signal);
        let won: string | undefined;
        try {
          won = await this.awaitTurn(lease);
        } finally {
          // One follower at a time, whatever ended the wait: the next term, or the lead, reads the log itself.
          following.abort();
          await follower;
        }
        if (won === undefined) continue;
        await this.lead(lease, won);
        return; // a term that led ends with its lease (revoked below), so that the leader key goes at once
      }
    } finally {
      clearInterval(publisher);
      await lease.revoke();
    }
  }

  /** followLog applies the log to the store and the hot state until signal aborts, catching up again after a failed watch. */
  private async followLog(signal: AbortSignal): Promise<void> {
    const stopped = new Promise<void>((resolve) => signal.addEventListener("abort", () => resolve(), { once: true }));
    while (!signal.aborted) {
      try {
        await this.loadHot();
        const { revision } = await this.reader.catchUp();
        this.leadership.follow(this.leaderUrl, true);
        await this.reader.follow(revision, stopped);
      } catch (error) {
        if (signal.aborted) break;
        this.leadership.follow(this.leaderUrl, false);
        if (error instanceof LogGapError)
          await this.loadSnapshot(error, signal).catch((e: Error) => this.logger.warn({ err: e.message }, "cluster: loading a snapshot failed"));
        else this.logger.warn({ err: (error as Error).message }, "cluster: following the log failed; catching up again");
        await sleep(RETRY_MS, signal);
      }
    }
  }

  /**
   * loadSnapshot replaces the local store's records with the leader's
   * (this member's next log entry is gone), and reads the log on from the
   * snapshot's entry.
   */
  private async loadSnapshot(gap: LogGapError, signal: AbortSignal): Promise<void> {
    while (this.leaderUrl === "" && !signal.aborted) await sleep(100, signal);
    if (signal.aborted) return;
    this.logger.info({ why: gap.message, leader: this.leaderUrl }, "cluster: loading a snapshot from the leader");
    const started = performance.now();
    await this.reader.stored();
    try {
      const { appliedSeq, records } = await this.local.loadSnapshot(fetchSnapshot(this.leaderUrl, this.clusterId, this.options.token, signal));
      this.logger.info({ appliedSeq, records, tookMs: Math.round(performance.now() - started) }, "cluster: snapshot loaded");
    } finally {
      // Whole or not, the store holds what the reader must start from: the snapshot, or nothing (a gap again, so another snapshot).
      this.hot = undefined; // loaded anew from the store
      this.reader.restart();
    }
  }

  /**
   * awaitTurn waits, while the lease holds, until this member is elected
   * (it resolves with the leader key's create revision) or the lease lapses
   * (undefined). It campaigns whenever no one leads and its store is caught
   * up; meanwhile it names the leader to the edge.
   */
  private async awaitTurn(lease: MemberLease): Promise<string | undefined> {
    while (lease.valid() && !this.closed) {
      const res = await this.client.kv.range({ key: this.keys.leader }, lease.callOptions());
      const current = res.kvs[0];
      if (current === undefined) {
        if (this.leadership.caughtUp) {
          const won = await this.campaign(lease);
          if (won !== undefined) return won;
        }
        await sleep(50, this.stop.signal);
        continue;
      }
      const leader = JSON.parse(current.value.toString()) as LeaderRecord;
      this.leaderUrl = leader.memberId === this.memberId ? "" : leader.url;
      this.leadership.follow(this.leaderUrl, this.leadership.caughtUp);
      await this.leaderKeyChange(res.header.revision, lease);
    }
    return undefined;
  }

  /** campaign puts the leader key with this member's lease unless it exists; it resolves with its create revision when it won. */
  private async campaign(lease: MemberLease): Promise<string | undefined> {
    const record: LeaderRecord = { memberId: this.memberId, url: this.advertiseUrl };
    const res = await this.client.kv.txn(
      {
        compare: [this.keys.absent(this.keys.leader)],
        success: [{ request_put: { key: this.keys.leader, value: Buffer.from(JSON.stringify(record)), lease: lease.id } }],
      },
      lease.callOptions(),
    );
    return res.succeeded ? res.header.revision : undefined;
  }

  /** leaderKeyChange resolves when the leader key changes after `revision`, the lease lapses, or the member closes. */
  private async leaderKeyChange(revision: string, lease: MemberLease): Promise<void> {
    let changed!: () => void;
    const change = new Promise<void>((resolve) => (changed = resolve));
    const close = await this.watches.open((client) => watchAfter(client.watch().key(this.keys.leader), revision), {
      put: changed,
      delete: changed,
      ended: changed,
    });
    try {
      // Read the key again at least every LEADER_RECHECK_MS, whatever the watch says: a silent watch must not keep a member from campaigning.
      await Promise.race([change, lease.lost, this.closing, sleep(LEADER_RECHECK_MS, this.stop.signal)]);
    } finally {
      await close();
    }
  }

  /**
   * lead serves as leader for as long as it can: it applies the whole log
   * (no one else appends now: appends are fenced by the leader key it
   * holds), takes over its hot state, opens to calls, and returns
   * once the term ended (lease lapsed, append failed, or close), with the
   * member closed to calls and its state dropped.
   */
  private async lead(lease: MemberLease, termRevision: string): Promise<void> {
    const started = performance.now();
    const { lastSeq } = await this.reader.catchUp(lease.remainingMs());
    const hot = this.hot !== undefined;
    const state = await this.takeOverHot();
    if (!lease.valid()) return;
    const writer = new LogWriter(this.client, this.keys, lease, termRevision, lastSeq + 1, this.copy);
    this.ledger.state = state;
    this.writer = writer;
    this.leaderUrl = "";
    this.leadership.lead(() => lease.valid());
    void this.publish(lease);
    // hot: it took over the state it kept as a standby (false: it loaded it from its store first, as a restart does).
    this.logger.info({ lastSeq, hot, tookMs: Math.round(performance.now() - started) }, "cluster: leading");
    const compactor = setInterval(() => void this.compact(lease, termRevision), COMPACT_MS);
    const cause = await Promise.race([writer.lost, lease.lost.then(() => "its etcd lease lapsed"), this.closing]);
    clearInterval(compactor);
    writer.end(this.closed ? "the member is shutting down" : "its term ended");
    this.leadership.follow("", false);
    this.writer = undefined;
    this.ledger.state = new MetadataState(this.options.clock, this.options.state);
    await writer.localDone();
    this.reader.restart();
    this.logger.warn({ cause: typeof cause === "string" ? cause : cause?.message }, "cluster: stopped leading");
  }

  /** loadHot loads the hot state from the store (which holds every group applied so far), unless it is loaded. */
  private async loadHot(): Promise<void> {
    if (this.hot !== undefined) return;
    await this.reader.stored();
    const started = performance.now();
    const hot = new ReplayState(this.options.clock, this.options.state, true);
    await loadState(hot, this.local.stored());
    this.hot = hot;
    this.logger.info({ appliedSeq: this.local.appliedSeq, tookMs: Math.round(performance.now() - started) }, "cluster: standby state loaded");
  }

  /** replay applies a group of the log to the hot state; one that fails to apply is dropped, and loaded anew from the store. */
  private replay(changes: readonly Change[]): void {
    if (this.hot === undefined) return;
    try {
      for (const change of changes) this.hot.apply(change);
    } catch (error) {
      this.hot = undefined;
      this.logger.error({ err: (error as Error).message }, "cluster: the standby state could not apply the log; it is loaded again from the store");
    }
  }

  /** takeOverHot readies the hot state to serve, loading it first if it is not loaded (as a restart does). */
  private async takeOverHot(): Promise<MetadataState> {
    await this.loadHot();
    const hot = this.hot!;
    this.hot = undefined; // it leads now: it is this term's state, not a standby's
    return hot.takeOver();
  }

  /** publish writes this member's record (role, applied entry) under its lease. */
  private async publish(lease: MemberLease): Promise<void> {
    if (!lease.valid()) return;
    const record: MemberRecord = {
      memberId: this.memberId,
      url: this.advertiseUrl,
      role: this.writer === undefined ? "standby" : "leader",
      appliedSeq: this.appliedSeq,
      atMs: Date.now(),
    };
    await this.client.kv
      .put({ key: this.keys.member(this.memberId), value: Buffer.from(JSON.stringify(record)), lease: lease.id }, lease.callOptions())
      .catch(() => undefined);
  }

  /** leading is true while this member leads. */
  leading(): boolean {
    return this.writer !== undefined;
  }

  /** members reads every member's record. */
  async members(): Promise<MemberRecord[]> {
    const res = await this.client.kv.range({ key: this.keys.members, range_end: this.keys.membersEnd }, within(2_000));
    return res.kvs.map((kv) => JSON.parse(kv.value.toString()) as MemberRecord);
  }

  /**
   * compact deletes the log entries that every live member applied, but
   * for the last logRetainEntries, and those more than maxLogEntries behind
   * the last; it always keeps the last entry (the next leader reads its
   * sequence number). The delete is fenced like an append; etcd's history
   * is compacted after it.
   */
  private async compact(lease: MemberLease, termRevision: string): Promise<void> {
    const writer = this.writer;
    if (writer === undefined || !lease.valid()) return;
    try {
      const members = await this.members();
      const last = writer.lastSeq;
      const applied = Math.min(last, ...members.map((m) => m.appliedSeq));
      const retained = Math.min(applied + 1, last - (this.options.logRetainEntries ?? 1_000));
      const keepFrom = Math.min(last, Math.max(retained, last - (this.options.maxLogEntries ?? 10_000)));
      if (keepFrom <= this.compactedBelow) return;
      const res = await this.client.kv.txn(
        {
          compare: [this.keys.heldBy(termRevision)],
          success: [{ request_delete_range: { key: this.keys.log, range_end: this.keys.logEntry(keepFrom) } }],
        },
        lease.callOptions(),
      );
      if (!res.succeeded) return;
      this.compactedBelow = keepFrom;
      // etcd keeps every deleted entry in its history until compacted: compact it too, or its database grows to its quota.
      await this.client.kv.compact({ revision: res.header.revision }, lease.callOptions());
    } catch (error) {
      this.logger.warn({ err: (error as Error).message }, "cluster: compacting the log failed");
    }
  }
}

/** ensureClusterId reads the cluster's id, making it if this is the cluster's first member. */
async function ensureClusterId(client: Etcd3, keys: ClusterKeys): Promise<string> {
  const id = randomUUID();
  const res = await client.kv.txn(
    {
      compare: [keys.absent(keys.id)],
      success: [{ request_put: { key: keys.id, value: Buffer.from(id) } }],
      failure: [{ request_range: { key: keys.id } }],
    },
    within(10_000),
  );
  return res.succeeded ? id : res.responses[0]!.response_range!.kvs[0]!.value.toString();
}

/** sleep resolves after ms, or at once when signal aborts; it leaves no listener behind. */
function sleep(ms: number, signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener("abort", done, { once: true });
  });
}
