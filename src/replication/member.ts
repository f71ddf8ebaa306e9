import type { Etcd3 } from "etcd3";
import type { Logger } from "pino";
import type { Change, Clock, StateOptions, StateReads } from "../core/index.js";
import { MetadataError, MetadataState, Reason } from "../core/index.js";
import type { PeerTls } from "../protocol/peer-tls.js";
import type { Leadership } from "../service/leadership.js";
import { commit } from "../service/ledger.js";
import type { LmdbStore } from "../store/lmdb-store.js";
import { CurrentLoad } from "../store/load-progress.js";
import { unaryAppend } from "./append-txn.js";
import { ClusterKeys, type MemberRecord } from "./cluster-keys.js";
import { Election, ensureClusterId } from "./election.js";
import { EtcdSession } from "./etcd-session.js";
import { HotStandby } from "./hot-standby.js";
import { type KeepAlives, unaryKeepAlives } from "./lease-keep-alive.js";
import { LocalCopy } from "./local-copy.js";
import { type EtcdUnary, etcd3Append, type LogAppend } from "./log-append.js";
import { etcd3LogEnd, unaryLogEnd } from "./log-end.js";
import { LogReader } from "./log-reader.js";
import { LogWriter } from "./log-writer.js";
import { etcd3RecordPut, type RecordPut, unaryRecordPut } from "./record-put.js";
import { ReplicatedStore } from "./replicated-store.js";
import { sleep } from "./sleep.js";
import { type MemberEntry, StandbyKeepers } from "./standby-keepers.js";
import { StandbyReads } from "./standby-reads.js";
import type { Watches } from "./watch.js";
import { attempts } from "./within.js";

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
  /** token is sent to the member this member asks for a snapshot (servers with token files need an admin token). */
  token?: string;
  /** peerTls is how this member reaches the others over TLS (the leader, to forward a call; any caught-up member, for a snapshot); undefined: cleartext members. */
  peerTls?: PeerTls;
  /** standbyReadLagMs is how far behind the log's end a standby may answer reads itself (StandbyReads, --standby-read-lag); 0 or undefined: never. */
  standbyReadLagMs?: number;
  /** etcdLean is a lean client of etcd (etcd-lean-client.ts) for the leader's appends, a standby's questions of the log's end, the lease's keep-alives and the member's records, closed with the member; undefined: the etcd3 client's (etcd3Append, etcd3LogEnd, KeepAliveStream, etcd3RecordPut). */
  etcdLean?: { txn: EtcdUnary; keepAlive: EtcdUnary; close(): void };
}

/** PUBLISH_MS is how often a member refreshes its record (applied entry, role). */
const PUBLISH_MS = 500;

/** LOAD_SHOWN_MS is how long a load runs before the member's record shows it: one that ends sooner is over before anyone could read it. */
const LOAD_SHOWN_MS = 1_000;

/** KNOWN_MS is how often a member also writes its lasting record (known/<id>), which status shows once the member is down. */
const KNOWN_MS = 5_000;
/** COMPACT_MS is how often a leader deletes log entries that every member applied. */
const COMPACT_MS = 2_000;
/** RETRY_MS is the pause before a member tries etcd again after a failure. */
const RETRY_MS = 250;

/**
 * Member is one server of a highly available cluster on etcd, as a loop of
 * terms, each on its own lease (EtcdSession). In a term it follows the log
 * as a hot standby (HotStandby) while it waits for its turn (Election);
 * elected, it leads: it applies the log up to its end, takes over the
 * standby's state, then appends each group commit to the log, fenced by
 * its term (LogWriter), publishes its record and compacts the log. A
 * standby refuses calls with NOT_LEADER naming the leader (Leadership). A
 * leader whose lease lapses or whose append fails drops its state and
 * follows again (loading a hot state anew).
 */
export class Member {
  readonly keys: ClusterKeys;
  /** ledger is the state this member serves (empty unless it leads) and its store; its reads are a standby's replayed state's when it answers reads itself. */
  readonly ledger: { state: MetadataState; readonly store: ReplicatedStore; readonly reads: () => StateReads };
  /** standbyReads decides which reads this member answers itself while it follows (--standby-read-lag). */
  readonly standbyReads: StandbyReads;
  /** loads is the long load the member runs now (its standby state, a snapshot), which it publishes with its record. */
  readonly loads = new CurrentLoad();
  private readonly reader: LogReader;
  /** append is how a term that leads appends to the log: on etcdLean when given, else through etcd3. */
  private readonly append: LogAppend;
  /** keepAlives is how a term keeps its lease alive: on etcdLean when given, else on one etcd3 stream (EtcdSession's own). */
  private readonly keepAlives: ((leaseId: string) => KeepAlives) | undefined;
  /** recordPut is how the member writes its records (publish): on etcdLean when given, else through etcd3. */
  private readonly recordPut: RecordPut;
  /** copy writes the groups applied or appended to the local store, a window at a time. */
  private readonly copy: LocalCopy;
  private readonly standby: HotStandby;
  private readonly election: Election;
  private writer: LogWriter | undefined;
  private advertiseUrl = "";
  /** compactedBelow is the first log entry this leader's compaction kept; entries below it are gone. */
  private compactedBelow = 1;
  /** keepers say, at each look at the members, whether a standby keeps the state, so that this leader need not (keepCopy). */
  private keepers: StandbyKeepers | undefined;
  /** known is when and as what this member last wrote its lasting record. */
  private known = { atMs: 0, role: "" };
  private closed = false;
  private readonly stop = new AbortController();
  /** closing resolves, once, when the member starts shutting down. */
  private readonly closing = new Promise<string>((resolve) =>
    this.stop.signal.addEventListener("abort", () => resolve("the member is shutting down"), { once: true }),
  );
  private running: Promise<void> = Promise.resolve();

  private constructor(
    private readonly client: Etcd3,
    watches: Watches,
    readonly local: LmdbStore,
    readonly clusterId: string,
    readonly leadership: Leadership,
    private readonly options: MemberOptions,
    private readonly logger: Logger,
  ) {
    this.keys = new ClusterKeys(options.clusterName);
    // The leader's appends, a standby's questions of the log's end, the lease's keep-alives and the records: on the lean client when there is one.
    const lean = options.etcdLean;
    this.append = lean ? unaryAppend(lean.txn) : etcd3Append(client);
    this.keepAlives = lean && ((leaseId) => unaryKeepAlives(lean.keepAlive, leaseId));
    const logEnd = lean ? unaryLogEnd(lean.txn, this.keys) : etcd3LogEnd(client, this.keys);
    this.recordPut = lean ? unaryRecordPut(lean.txn) : etcd3RecordPut(client);
    this.copy = new LocalCopy(local);
    this.reader = new LogReader(client, watches, this.keys, this.copy, (changes) => {
      this.standby.apply(changes);
      this.standbyReads.applied();
    });
    const leaderUrl = () => this.election.leaderUrl;
    const snapshotSources = () => this.snapshotSources();
    this.standby = new HotStandby(this.reader, local, leadership, { ...options, clusterId, leaderUrl, snapshotSources }, this.loads, logger);
    this.election = new Election(client, watches, this.keys, () => ({ memberId: this.memberId, url: this.advertiseUrl }), leadership, this.stop.signal);
    this.standbyReads = new StandbyReads(
      options.standbyReadLagMs ?? 0,
      () => this.reader.appliedSeq,
      () => this.standby.reads(),
      logEnd,
      options.state.shards > 1,
    );
    if (this.standbyReads.lagMs > 0) leadership.reads = this.standbyReads;
    this.ledger = {
      state: new MetadataState(options.clock, options.state),
      store: new ReplicatedStore(this, clusterId, local, [client, watches, ...(options.etcdLean ? [options.etcdLean] : [])]),
      reads: () => this.reads(),
    };
  }

  /** reads are what a read runs on: the state while leading, else the replayed one (the edge let the read through: StandbyReads). */
  private reads(): StateReads {
    if (this.writer !== undefined) return this.ledger.state;
    const replica = this.standby.reads();
    if (replica === undefined) throw this.leadership.refusal ?? new MetadataError(Reason.NOT_LEADER, "not leading");
    return replica;
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

  /** shard is the shard this member serves (--shard, or its --member-index mod --shards). */
  get shard(): number {
    return this.options.state.shard;
  }

  /** advertise is the URL clients and the other members reach this member at ("" before start). */
  get advertise(): string {
    return this.advertiseUrl;
  }

  /** appliedSeq is the last log entry this member applied (or appended); its store holds it within FLUSH_MS. */
  get appliedSeq(): number {
    return this.writer?.lastSeq ?? this.reader.appliedSeq;
  }

  /** start runs the member's terms in the background until close; advertiseUrl is how clients and the other members reach it. */
  start(advertiseUrl: string): void {
    this.advertiseUrl = advertiseUrl;
    this.running = Promise.all([this.run(), this.standbyReads.run(this.stop.signal, () => this.writer !== undefined)]).then(() => undefined);
  }

  /**
   * commit is the leader's commit of a call's changes; refused with
   * NOT_LEADER on a standby, but for a read it answered itself: no change,
   * and what it read is in the log already.
   */
  commit(changes: readonly Change[]): Promise<void> {
    if (this.writer === undefined && changes.length === 0 && this.leadership.refusal !== undefined) return Promise.resolve();
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
        this.leadership.follow(this.election.leaderUrl, false);
        await sleep(RETRY_MS, this.stop.signal);
      }
    }
  }

  /** term runs on one lease: follow the log, campaign when no one leads, lead when elected; it ends when the lease lapses. */
  private async term(): Promise<void> {
    const session = await EtcdSession.grant(this.client, this.options.leaderLeaseMs, this.keepAlives);
    const publisher = setInterval(() => void this.publish(session), PUBLISH_MS);
    try {
      await this.publish(session);
      while (session.valid() && !this.closed) {
        const following = new AbortController();
        const follower = this.standby.follow(following.signal);
        let won: string | undefined;
        try {
          won = await this.election.awaitTurn(session);
        } finally {
          // One follower at a time, whatever ended the wait: the next term, or the lead, reads the log itself.
          following.abort();
          await follower;
        }
        if (won === undefined) continue;
        await this.lead(session, won);
        return; // a term that led ends with its lease (revoked below), so that the leader key goes at once
      }
    } finally {
      clearInterval(publisher);
      await session.revoke();
    }
  }

  /**
   * lead serves as leader for as long as it can: it applies the whole log
   * (no one else appends now: appends are fenced by the leader key it
   * holds), takes over its hot state, opens to calls, and returns
   * once the term ended (lease lapsed, append failed, or close), with the
   * member closed to calls and its state dropped.
   */
  private async lead(session: EtcdSession, termRevision: string): Promise<void> {
    const started = performance.now();
    const { lastSeq } = await this.reader.catchUp(session.remainingMs());
    const hot = this.standby.loaded;
    const state = await this.standby.takeOver();
    if (!session.valid()) return;
    const writer = new LogWriter(this.append, this.keys, session, termRevision, lastSeq + 1, this.copy, this.logger);
    this.ledger.state = state;
    this.writer = writer;
    this.copy.lead();
    this.keepers = new StandbyKeepers(this.memberId, lastSeq, this.options.maxLogEntries ?? 10_000);
    this.election.leaderUrl = "";
    this.leadership.lead(() => session.valid());
    void this.publish(session);
    // hot: it took over the state it kept as a standby (false: it loaded it from its store first, as a restart does).
    this.logger.info({ lastSeq, hot, tookMs: Math.round(performance.now() - started) }, "cluster: leading");
    const compactor = setInterval(() => void this.compact(session, termRevision), COMPACT_MS);
    const cause = await Promise.race([writer.lost, session.lost.then(() => "its etcd lease lapsed"), this.closing]);
    clearInterval(compactor);
    writer.end(this.closed ? "the member is shutting down" : "its term ended");
    this.leadership.follow("", false);
    this.writer = undefined;
    this.ledger.state = new MetadataState(this.options.clock, this.options.state);
    await writer.localDone();
    this.reader.restart();
    this.logger.warn({ cause: typeof cause === "string" ? cause : cause?.message }, "cluster: stopped leading");
  }

  /** publish writes this member's record (role, applied entry, load under way) under its lease. */
  private async publish(session: EtcdSession): Promise<void> {
    if (!session.valid()) return;
    const record: MemberRecord = {
      memberId: this.memberId,
      url: this.advertiseUrl,
      role: this.writer === undefined ? "standby" : "leader",
      appliedSeq: this.appliedSeq,
      atMs: Date.now(),
    };
    const loading = this.loads.lasting(LOAD_SHOWN_MS);
    const value = Buffer.from(JSON.stringify(loading === undefined ? record : { ...record, loading }));
    await session.call((options) => this.recordPut(this.keys.member(this.memberId), value, session.id, options)).catch(() => undefined);
    if (record.atMs - this.known.atMs < KNOWN_MS && record.role === this.known.role) return;
    this.known = { atMs: record.atMs, role: record.role };
    // The lasting record, which status shows once the member is down, never holds a load: a member that is down loads nothing.
    const lasting = loading === undefined ? value : Buffer.from(JSON.stringify(record));
    await session.call((options) => this.recordPut(this.keys.knownMember(this.memberId), lasting, undefined, options)).catch(() => undefined);
  }

  /** leading is true while this member leads. */
  leading(): boolean {
    return this.writer !== undefined;
  }

  /** caughtUp is true while this member follows with its store loaded and the log applied to its end, or leads with its store current (keepCopy): it may give a snapshot. */
  caughtUp(): boolean {
    return this.leadership.caughtUp && (this.writer === undefined || this.copy.current);
  }

  /**
   * snapshotSources lists whom this member asks for a snapshot, in turn:
   * the other standbys, furthest in the log first (a caught-up one spares
   * the leader, whose one event loop every write needs, the whole read),
   * then the leader.
   */
  private async snapshotSources(): Promise<string[]> {
    const members = await this.members().catch(() => [] as MemberRecord[]);
    const standbys = members
      .filter((m) => m.role === "standby" && m.memberId !== this.memberId && m.url !== "")
      .sort((a, b) => b.appliedSeq - a.appliedSeq)
      .map((m) => m.url);
    const leader = this.election.leaderUrl;
    return leader === "" ? standbys : [...standbys, leader];
  }

  /** members reads the record of every member that runs. */
  async members(): Promise<MemberRecord[]> {
    return (await this.memberEntries()).map((m) => m.record);
  }

  /** memberEntries reads the record of every member that runs, with the etcd revision it was last written at (every PUBLISH_MS while the member lives). */
  private async memberEntries(): Promise<MemberEntry[]> {
    const res = await attempts(2_000, (options) => this.client.kv.range({ key: this.keys.members, range_end: this.keys.membersEnd }, options));
    return res.kvs.map((kv) => ({ record: JSON.parse(kv.value.toString()) as MemberRecord, revision: kv.mod_revision }));
  }

  /** knownMembers reads the lasting record of every member the cluster has known (forgotten ones aside). */
  async knownMembers(): Promise<MemberRecord[]> {
    const res = await attempts(2_000, (options) => this.client.kv.range({ key: this.keys.known, range_end: this.keys.knownEnd }, options));
    return res.kvs.map((kv) => JSON.parse(kv.value.toString()) as MemberRecord);
  }

  /** forget deletes a member's lasting record: "running" while it runs, "unknown" when there is none, "forgotten" once gone. */
  async forget(memberId: string): Promise<"running" | "unknown" | "forgotten"> {
    const res = await attempts(2_000, (options) =>
      this.client.kv.txn(
        {
          compare: [this.keys.absent(this.keys.member(memberId))],
          success: [{ request_delete_range: { key: this.keys.knownMember(memberId) } }],
        },
        options,
      ),
    );
    if (!res.succeeded) return "running";
    return Number(res.responses[0]?.response_delete_range?.deleted ?? 0) > 0 ? "forgotten" : "unknown";
  }

  /**
   * keepCopy decides, at each look at the members, whether this leader
   * writes its groups to its store (LocalCopy): not while a standby keeps
   * the state on its own disk (StandbyKeepers): the log and that store then
   * hold every acknowledged change. When none does, the leader writes its
   * state whole (rewrite) and copies again. False while the store is not
   * current: the log is then not compacted, so that it keeps what the
   * store lacks.
   */
  private keepCopy(entries: readonly MemberEntry[], writer: LogWriter): boolean {
    const kept = this.keepers?.look(entries, writer.lastSeq) ?? false;
    if (kept) {
      if (this.copy.current)
        this.logger.info({ storedSeq: this.copy.storedSeq }, "cluster: a standby keeps the state; the leader stops copying it to its store");
      this.copy.skip();
      return true;
    }
    if (!this.copy.skipping) return this.copy.current;
    // Every change the state made is in the cut's group or before it: the records are the log up to the entry the cut gives.
    void commit(this.ledger).catch(() => undefined);
    const started = performance.now();
    const records = this.ledger.state.records();
    this.logger.info(
      { records: records.length, listMs: Math.round(performance.now() - started), storedSeq: this.copy.storedSeq },
      "cluster: no standby keeps the state; the leader writes it whole to its store",
    );
    this.copy.rewrite(records, writer.cut()).then(
      () =>
        this.logger.info({ storedSeq: this.copy.storedSeq, tookMs: Math.round(performance.now() - started) }, "cluster: the leader's store holds the state"),
      (error: Error) => this.logger.warn({ err: error.message }, "cluster: writing the state to the leader's store failed"),
    );
    return false;
  }

  /**
   * compact deletes the log entries that every live member applied, but
   * for the last logRetainEntries, and those more than maxLogEntries behind
   * the last; it always keeps the last entry (the next leader reads its
   * sequence number). The delete is fenced like an append; etcd's history
   * is compacted after it.
   */
  private async compact(session: EtcdSession, termRevision: string): Promise<void> {
    const writer = this.writer;
    if (writer === undefined || !session.valid()) return;
    try {
      const entries = await this.memberEntries();
      if (this.writer !== writer) return; // the term ended meanwhile
      const members = entries.map((m) => m.record);
      const last = writer.lastSeq;
      if (!this.keepCopy(entries, writer)) return;
      const applied = Math.min(last, ...members.map((m) => m.appliedSeq));
      const retained = Math.min(applied + 1, last - (this.options.logRetainEntries ?? 1_000));
      const keepFrom = Math.min(last, Math.max(retained, last - (this.options.maxLogEntries ?? 10_000)));
      if (keepFrom <= this.compactedBelow) return;
      const res = await session.call((options) =>
        this.client.kv.txn(
          {
            compare: [this.keys.heldBy(termRevision)],
            success: [{ request_delete_range: { key: this.keys.log, range_end: this.keys.logEntry(keepFrom) } }],
          },
          options,
        ),
      );
      if (!res.succeeded) return;
      this.compactedBelow = keepFrom;
      // etcd keeps every deleted entry in its history until compacted: compact it too, or its database grows to its quota.
      await session.call((options) => this.client.kv.compact({ revision: res.header.revision }, options));
    } catch (error) {
      this.logger.warn({ err: (error as Error).message }, "cluster: compacting the log failed");
    }
  }
}
