import type { Logger } from "pino";
import type { Change, Clock, MetadataState, StateOptions, StateReads } from "../core/index.js";
import { ReplayState } from "../core/index.js";
import type { PeerTls } from "../protocol/peer-tls.js";
import type { Leadership } from "../service/leadership.js";
import type { LmdbStore } from "../store/lmdb-store.js";
import { type CurrentLoad, logProgress } from "../store/load-progress.js";
import { loadState } from "../store/load-state.js";
import { LogGapError, type LogReader } from "./log-reader.js";
import { fetchSnapshot } from "./replication-service.js";
import { aborted, sleep } from "./sleep.js";

/** RETRY_MS is the pause before a standby reads the log again after a failure. */
const RETRY_MS = 250;
/** SNAPSHOT_RETRY_MAX_MS caps the pause, doubled after each snapshot that no member gave (a cold start, the others still down). */
const SNAPSHOT_RETRY_MAX_MS = 2_000;
/** SNAPSHOT_FAILED is logged when no member asked gave this member a snapshot whole; it asks again later. */
export const SNAPSHOT_FAILED = "cluster: loading a snapshot failed";
/** NO_SNAPSHOT_SOURCE is logged when this member's next log entry is gone and no other member is up to load a snapshot from. */
export const NO_SNAPSHOT_SOURCE = "cluster: the log's next entry is gone and no other member is up to load a snapshot from; waiting for one";

/** HotStandbyOptions are what a hot standby needs besides its log and store. */
export interface HotStandbyOptions {
  clock: Clock;
  /** state are the rules of the state it will serve. */
  state: StateOptions;
  clusterId: string;
  /** token is sent to the member the standby asks for a snapshot. */
  token?: string;
  /** peerTls is how the standby reaches the other members over TLS, for a snapshot; undefined: cleartext. */
  peerTls?: PeerTls;
  /** leaderUrl names the leader now ("" when unknown). */
  leaderUrl: () => string;
  /** snapshotSources lists the members to ask for a snapshot, in the order to ask them (Member.snapshotSources). */
  snapshotSources: () => Promise<string[]>;
}

/**
 * HotStandby is a member that follows: it applies the replicated log to
 * its store (LogReader) and to a hot state (ReplayState) that it loaded
 * from the store when it began to follow, loads a snapshot from another
 * member when the log no longer holds its next entry, and tells the edge whether
 * it is caught up (Leadership). The hot state is its own: `takeOver`
 * hands it, ready to serve, to the member that is to lead with it.
 */
export class HotStandby {
  /** hot is equal to the log at the applied entry; undefined until (re)loaded. */
  private hot: ReplayState | undefined;

  constructor(
    private readonly reader: LogReader,
    private readonly local: LmdbStore,
    private readonly leadership: Leadership,
    private readonly options: HotStandbyOptions,
    /** loads shows the standby's long loads (its state, a snapshot) in its member record. */
    private readonly loads: CurrentLoad,
    private readonly logger: Logger,
  ) {}

  /** reads reads the hot state as it stands, while it is loaded. */
  reads(): StateReads | undefined {
    return this.hot?.reads;
  }

  /** loaded is true while the hot state is loaded (a takeover then needs no load). */
  get loaded(): boolean {
    return this.hot !== undefined;
  }

  /** follow applies the log to the store and the hot state until signal aborts, catching up again after a failed watch. */
  async follow(signal: AbortSignal): Promise<void> {
    const stopped = aborted(signal);
    let snapshotsFailed = 0;
    while (!signal.aborted) {
      try {
        await this.load();
        const { revision } = await this.reader.catchUp();
        snapshotsFailed = 0;
        this.leadership.follow(this.options.leaderUrl(), true);
        await this.reader.follow(revision, stopped);
      } catch (error) {
        if (signal.aborted) break;
        this.leadership.follow(this.options.leaderUrl(), false);
        if (error instanceof LogGapError) {
          try {
            await this.loadSnapshot(error, signal);
            snapshotsFailed = 0;
          } catch (e) {
            snapshotsFailed++;
            this.logger.warn({ err: (e as Error).message }, SNAPSHOT_FAILED);
          }
        } else this.logger.warn({ err: (error as Error).message }, "cluster: following the log failed; catching up again");
        await sleep(Math.min(SNAPSHOT_RETRY_MAX_MS, RETRY_MS * 2 ** snapshotsFailed), signal);
      }
    }
  }

  /** apply applies a group of the log to the hot state (the reader's `applied`); one that fails to apply is dropped, and loaded anew from the store. */
  apply(changes: readonly Change[]): void {
    if (this.hot === undefined) return;
    try {
      for (const change of changes) this.hot.apply(change);
    } catch (error) {
      this.hot = undefined;
      this.logger.error({ err: (error as Error).message }, "cluster: the standby state could not apply the log; it is loaded again from the store");
    }
  }

  /** takeOver hands the hot state over, ready to serve, loading it first if it is not loaded (as a restart does); the standby has none after. */
  async takeOver(): Promise<MetadataState> {
    await this.load();
    const hot = this.hot!;
    this.hot = undefined; // it leads now: it is the term's state, not a standby's
    return hot.takeOver();
  }

  /** load loads the hot state from the store (which holds every group applied so far), unless it is loaded. */
  private async load(): Promise<void> {
    if (this.hot !== undefined) return;
    await this.reader.stored();
    const started = performance.now();
    const hot = new ReplayState(this.options.clock, this.options.state, true);
    await this.loads.track(
      "loading the standby state",
      (report) => loadState(hot, this.local.stored(report)),
      logProgress(this.logger, "cluster: loading the standby state"),
    );
    this.hot = hot;
    this.logger.info({ appliedSeq: this.local.appliedSeq, tookMs: Math.round(performance.now() - started) }, "cluster: standby state loaded");
  }

  /**
   * loadSnapshot replaces the local store's records with another member's
   * (this member's next log entry is gone), asking the members of
   * snapshotSources in turn until one gives it whole, and reads the log on
   * from the snapshot's entry.
   */
  private async loadSnapshot(gap: LogGapError, signal: AbortSignal): Promise<void> {
    let sources = await this.options.snapshotSources();
    // With no other member up (a power loss, this one back first), it waits for one: said once, as nothing else shows it.
    if (sources.length === 0) this.logger.warn({ why: gap.message }, NO_SNAPSHOT_SOURCE);
    while (sources.length === 0 && !signal.aborted) {
      await sleep(100, signal);
      sources = await this.options.snapshotSources();
    }
    if (signal.aborted) return;
    await this.reader.stored();
    const before = this.local.appliedSeq;
    try {
      for (const [i, from] of sources.entries()) {
        this.logger.info({ why: gap.message, from }, "cluster: loading a snapshot");
        const started = performance.now();
        try {
          const { appliedSeq, records } = await this.loads.track(
            "loading a snapshot",
            (report) => this.local.loadSnapshot(fetchSnapshot(from, this.options.clusterId, this.options.token, this.options.peerTls, signal), report),
            logProgress(this.logger, "cluster: loading a snapshot"),
          );
          this.logger.info({ appliedSeq, records, from, tookMs: Math.round(performance.now() - started) }, "cluster: snapshot loaded");
          return;
        } catch (error) {
          if (signal.aborted || i === sources.length - 1) throw error;
          this.logger.warn({ err: (error as Error).message, from }, "cluster: no snapshot from this member; asking the next");
        }
      }
    } finally {
      // The store holds what the reader must start from: the snapshot, part of one (a gap again, so another snapshot),
      // or, when no member sent a piece, what it held, which the hot state still equals.
      if (this.local.appliedSeq !== before || this.local.loadingSnapshot) this.hot = undefined; // loaded anew from the store
      this.reader.restart();
    }
  }
}
