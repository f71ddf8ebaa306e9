import { execFile } from "node:child_process";
import { randomUUID } from "node:crypto";
import { existsSync, statSync } from "node:fs";
import { resolve } from "node:path";
import { type Database, open, type RootDatabase, type Transaction } from "lmdb";
import type { Change, ShardPart } from "../core/index.js";
import { MetadataError, Reason } from "../core/index.js";
import { dataFile, prepareDataDir } from "./data-dir.js";
import { DataDirLock } from "./data-dir-lock.js";
import { type LoadProgress, ProgressReporter } from "./load-progress.js";
import { entryCount, migrateParents } from "./migration.js";
import { DROP_CHUNK, droppingMark, finishDrops, isDrop, namespaceRecords } from "./namespace-drop.js";
import { finishSweeps, isUnrank, RankSweep, SWEEP_CHUNK, unrankingMark } from "./rank-sweep.js";
import { DB_NAMES, FORMAT_VERSION, storedChange, type Write, writeOf } from "./schema.js";
import type { Store } from "./store.js";

/** APPLIED_SEQ and CLUSTER_ID are the meta records of a member of a highly available cluster (see src/replication/). */
const APPLIED_SEQ = "appliedSeq";
const CLUSTER_ID = "clusterId";
/** SHARD is the meta key of the shard a store keeps (keepShard). */
const SHARD = "shard";
/** SNAPSHOT_LOADING marks a member's store whose records are a snapshot still arriving: incomplete until the mark goes (loadSnapshot). */
const SNAPSHOT_LOADING = "snapshotLoading";

/** SnapshotPiece is part of a snapshot as it arrives: records, the log entry the whole snapshot is at, and how many records it holds in all (0: not said). */
export interface SnapshotPiece {
  appliedSeq: number;
  records: readonly Change[];
  total: number;
}

export type { LoadProgress } from "./load-progress.js";

const VERIFIER = new URL("./verify-lmdb.mjs", import.meta.url).pathname;

/** StoreOpenError says why a data dir cannot be used; the server refuses to start with it. */
export class StoreOpenError extends Error {
  override name = "StoreOpenError";
}

/**
 * LmdbStore keeps the state in an LMDB environment (lmdb-js) under a data
 * dir. Writes of one commit are issued in one event turn, so lmdb-js puts
 * them in one transaction, together with those of every other call of that
 * turn (group commit); transactions commit in issue order. With
 * overlappingSync off, a transaction's promise resolves once it is synced
 * to disk, so a resolved commit is durable.
 */
export class LmdbStore implements Store {
  private tail: Promise<void> = Promise.resolve();
  /** dropping settles once the drops under way, and the commits after them, are done (dropInSteps); undefined when none is. */
  private dropping: Promise<void> | undefined;
  private failure: MetadataError | undefined;
  private onFailure!: (error: Error) => void;
  readonly failed = new Promise<Error>((resolve) => (this.onFailure = resolve));

  private constructor(
    readonly path: string,
    readonly serverId: string,
    private readonly env: RootDatabase,
    readonly dbs: Record<(typeof DB_NAMES)[number], Database>,
    private readonly lock: DataDirLock | undefined,
    /** migratedFrom is the format version this open migrated the store from (schema.ts); undefined when it was current. */
    readonly migratedFrom: number | undefined,
  ) {}

  /**
   * open opens (or creates) the store of dataDir. Unless readOnly, it takes
   * the data dir's lock, waiting up to lockWaitMs for another process to
   * release it. Throws StoreOpenError naming the path when the
   * store is locked, unreadable, corrupt, truncated or of another format
   * version; it never starts empty over existing data.
   */
  static async open(
    dataDir: string,
    {
      readOnly = false,
      overlappingSync = false,
      migrating = (_: LoadProgress) => {},
      lockWaitMs = 0,
      waitingForLock = () => {},
    }: {
      readOnly?: boolean;
      overlappingSync?: boolean;
      migrating?: (p: LoadProgress) => void;
      /** lockWaitMs is how long to wait for another process to release the data dir (a restart's previous process); 0: refuse at once. */
      lockWaitMs?: number;
      /** waitingForLock is told once when the data dir is locked and the open waits for it. */
      waitingForLock?: () => void;
    } = {},
  ): Promise<LmdbStore> {
    const path = resolve(dataDir);
    try {
      prepareDataDir(path, readOnly);
    } catch (error) {
      throw new StoreOpenError((error as Error).message);
    }
    const lock = readOnly
      ? undefined
      : await DataDirLock.acquire(path, lockWaitMs, waitingForLock).catch((e: Error) => {
          throw new StoreOpenError(e.message);
        });
    try {
      const existed = checkDataFile(path);
      if (existed) await verifyReadable(path);
      if (readOnly && !existed) throw new StoreOpenError(`data dir ${path} holds no store (no data.mdb)`);
      // noSubdir false: lmdb-js would take a path with a dot (hf3fs.data) for a file.
      const env = open({ path, noSubdir: false, readOnly, overlappingSync, noSync: false, maxDbs: 8 });
      const dbs = Object.fromEntries(DB_NAMES.map((name) => [name, env.openDB(name, {})])) as LmdbStore["dbs"];
      const { serverId, migratedFrom } = await initMeta(path, dbs, readOnly, migrating);
      // A store still marked as loading a snapshot lost the load midway: it holds part of one.
      if (!readOnly && dbs.meta.get(SNAPSHOT_LOADING) !== undefined) emptyRecords(env, dbs, false);
      if (!readOnly) {
        finishDrops(dbs);
        finishSweeps(dbs, SWEEP_CHUNK);
      }
      return new LmdbStore(path, serverId, env, dbs, lock, migratedFrom);
    } catch (error) {
      await lock?.release();
      if (error instanceof StoreOpenError) throw error;
      throw new StoreOpenError(`cannot open the store in ${path}: ${(error as Error).message}`);
    }
  }

  /**
   * stored yields every stored record as the change that restores it: ranks
   * first, then keys, reservations and draining pages (ranks first is the
   * order MetadataState.restore wants). It reports progress about every
   * `reportEveryMs` (a second) among the keys, and once at the end.
   */
  *stored(progress: (p: LoadProgress) => void = () => {}, transaction?: Transaction, reportEveryMs = 1_000): Generator<Change> {
    const reporter = new ProgressReporter(progress, this.entryCount(), reportEveryMs);
    let records = 0;
    for (const { key, value } of this.dbs.ranks.getRange({ transaction })) {
      records++;
      yield storedChange("ranks", key, value);
    }
    for (const { key, value } of this.dbs.keys.getRange({ transaction })) {
      if ((++records & 0x3fff) === 0) reporter.at(records); // the clock read every 16,384 records, not every record
      yield storedChange("keys", key, value);
    }
    // A store of version 1 opened read-only has no long_keys table (lmdb-js creates tables only for writers).
    for (const { value } of (this.dbs.long_keys as Database | undefined)?.getRange({ transaction }) ?? []) {
      records++;
      yield storedChange("long_keys", undefined, value);
    }
    for (const { key, value } of this.dbs.reservations.getRange({ transaction })) {
      records++;
      yield storedChange("reservations", key, value);
    }
    for (const { key, value } of this.dbs.drains.getRange({ transaction })) {
      records++;
      yield storedChange("drains", key, value);
    }
    reporter.at(records);
    reporter.done();
  }

  /**
   * snapshot reads the store at one moment, whatever is committed
   * meanwhile: its applied log entry and every record (in stored()'s
   * order). Call done() once read: an open read transaction keeps LMDB
   * from reusing the pages it sees.
   */
  snapshot(): { appliedSeq: number; total: number; records: Generator<Change>; done(): void } {
    const transaction = this.env.useReadTransaction();
    const appliedSeq = (this.dbs.meta.get(APPLIED_SEQ, { transaction }) as number | undefined) ?? 0;
    return { appliedSeq, total: this.entryCount(), records: this.stored(undefined, transaction), done: () => transaction.done() };
  }

  /** entryCount is the number of records the store holds. */
  private entryCount(): number {
    return entryCount([this.dbs.ranks, this.dbs.keys, this.dbs.long_keys as Database | undefined, this.dbs.reservations, this.dbs.drains]);
  }

  commit(changes: readonly Change[]): Promise<void> {
    return this.commitApplied(changes, undefined);
  }

  /**
   * commitApplied commits `changes` and, in the same transaction, records
   * that the replicated log is applied up to sequence number `appliedSeq`
   * (a member of a highly available cluster); undefined records nothing.
   */
  commitApplied(changes: readonly Change[], appliedSeq: number | undefined): Promise<void> {
    if (this.failure !== undefined) return Promise.reject(this.failure);
    if (changes.length === 0 && appliedSeq === undefined) return this.tail;
    // A drop or a rank's, and every commit after one until it is done, goes in steps (dropInSteps); the rest in this event turn.
    if (this.dropping === undefined && !changes.some(inSteps)) return this.settle(this.issue(changes, appliedSeq));
    const after = this.tail;
    const steps = (this.dropping ?? Promise.resolve()).then(async () => {
      await after;
      await this.dropInSteps(changes, appliedSeq);
    });
    const dropping = steps.then(noop, noop);
    this.dropping = dropping;
    void dropping.then(() => {
      if (this.dropping === dropping) this.dropping = undefined;
    });
    return this.settle(steps);
  }

  /** settle makes `last` the store's tail, a failure of it the store's failure. */
  private settle(last: Promise<unknown>): Promise<void> {
    this.tail = last.then(
      () => undefined,
      (error: Error) => this.fail(error),
    );
    return this.tail;
  }

  /**
   * issue issues the writes of `changes` (no drop among them), then `extra`
   * ones, and the applied log entry, in this event turn, so lmdb-js puts
   * them in one transaction; the promise is the last write's.
   */
  private issue(changes: readonly Change[], appliedSeq: number | undefined, extra: readonly Write[] = []): Promise<unknown> {
    let last: Promise<unknown> = Promise.resolve();
    try {
      // Encode every write before issuing any, so a change that cannot be encoded leaves nothing half written.
      const writes = [...changes.map(writeOf), ...extra];
      for (const write of writes) {
        const db = write.db === "meta" ? this.dbs.meta : this.dbs[write.db];
        last = write.value === undefined ? db.remove(write.key) : db.put(write.key, write.value);
        // Writes of one turn share a transaction and fail together: the last one's promise carries the failure (below).
        last.catch(ignoreCommitError);
      }
      if (appliedSeq !== undefined) {
        last = this.dbs.meta.put(APPLIED_SEQ, appliedSeq);
        last.catch(ignoreCommitError);
      }
    } catch (error) {
      return Promise.reject(error);
    }
    return last;
  }

  /**
   * dropInSteps commits changes that hold drops of namespaces or ranks,
   * after every earlier commit is durable (a drop reads the records it
   * removes or rewrites). A namespace of at most DROP_CHUNK records goes in
   * the transaction of the changes around it; a larger one is marked
   * dropping with the changes before it, removed DROP_CHUNK records per
   * transaction, one event turn each, and unmarked with the changes after
   * it (schema.ts). Writes of the group to a dropped namespace before its
   * drop are not issued: the drop removes them. A rank's drop is marked with
   * the changes before it (its sweep reads their records), then sweeps its
   * namespace's key records SWEEP_CHUNK per transaction (RankSweep), the
   * last chunk with the changes after it and the mark lifted.
   */
  private async dropInSteps(changes: readonly Change[], appliedSeq: number | undefined): Promise<void> {
    // Encoded before any is issued, so a change that cannot be encoded leaves nothing half written.
    const encoded = changes.map((change) => (inSteps(change) ? change : { namespace: change.namespace, write: writeOf(change) }));
    let turn: { namespace: string; write: Write }[] = [];
    const writes = () => turn.map(({ write }) => write);
    for (const next of encoded) {
      if (!("kind" in next)) {
        turn.push(next);
        continue;
      }
      const namespace = next.namespace;
      if (isUnrank(next)) {
        const mark = unrankingMark(next);
        await this.issue([], undefined, [...writes(), { db: "meta", key: mark, value: [1] }]);
        const sweep = new RankSweep(this.dbs, next);
        let chunk = sweep.next(SWEEP_CHUNK)!;
        for (let more = sweep.next(SWEEP_CHUNK); more !== undefined; more = sweep.next(SWEEP_CHUNK)) {
          await this.issue([], undefined, chunk);
          chunk = more;
        }
        turn = [...chunk.map((write) => ({ namespace, write })), { namespace: "", write: { db: "meta", key: mark, value: undefined } }];
        continue;
      }
      turn = turn.filter((w) => w.namespace !== namespace);
      const records = namespaceRecords(this.dbs, namespace, DROP_CHUNK + 1);
      if (records.length <= DROP_CHUNK) {
        turn.push(...records.map((write) => ({ namespace, write })));
        continue;
      }
      const mark = droppingMark(namespace);
      await this.issue([], undefined, [...writes(), { db: "meta", key: mark, value: [1] }]);
      for (let chunk = records.slice(0, DROP_CHUNK); chunk.length > 0; chunk = namespaceRecords(this.dbs, namespace, DROP_CHUNK)) {
        await this.issue([], undefined, chunk);
      }
      turn = [{ namespace: "", write: { db: "meta", key: mark, value: undefined } }];
    }
    await this.issue([], appliedSeq, writes());
  }

  private fail(error: Error): Promise<never> {
    ignoreCommitError(error);
    const cause = "commitError" in error ? "a commit failed (a full disk or an I/O error; lmdb prints the cause on stderr)" : error.message;
    this.failure ??= new MetadataError(Reason.STORE_UNAVAILABLE, `the store in ${this.path} failed: ${cause}`);
    this.onFailure(this.failure);
    return Promise.reject(this.failure);
  }

  /** appliedSeq is the sequence number of the last replicated log entry applied here; 0 for none (a new member, or single-node data). */
  get appliedSeq(): number {
    return (this.dbs.meta.get(APPLIED_SEQ) as number | undefined) ?? 0;
  }

  /** loadingSnapshot is true while the store holds part of a snapshot (loadSnapshot began writing one and did not finish it). */
  get loadingSnapshot(): boolean {
    return this.dbs.meta.get(SNAPSHOT_LOADING) !== undefined;
  }

  /** clusterId is the id of the highly available cluster whose state this is; undefined when the store never joined one. */
  get clusterId(): string | undefined {
    return this.dbs.meta.get(CLUSTER_ID) as string | undefined;
  }

  /** joinCluster records the cluster whose state this store keeps from now on. */
  async joinCluster(clusterId: string): Promise<void> {
    await this.dbs.meta.put(CLUSTER_ID, clusterId);
  }

  /** shard is the shard whose part of the pages this store keeps (shard 0 of 1, not split, for a store that never recorded one); kept as "INDEX/COUNT". */
  get shard(): ShardPart {
    const [index, count] = ((this.dbs.meta.get(SHARD) as string | undefined) ?? "0/1").split("/").map(Number);
    return { index: index!, count: count! };
  }

  /** recordShard records the shard this store keeps from now on (keepShard, in server/start.ts, checks it first). */
  async recordShard(part: ShardPart): Promise<void> {
    await this.dbs.meta.put(SHARD, `${part.index}/${part.count}`);
  }

  /** isEmpty is true when the store holds no rank (so no key, reservation or draining page either). */
  isEmpty(): boolean {
    return this.dbs.ranks.getKeysCount() === 0;
  }

  /**
   * loadSnapshot replaces every record with a snapshot of a cluster's
   * state that arrives in pieces, without holding it whole: once the first
   * piece is here (until then the store is left as it was) and the commits
   * in flight are done, one transaction drops the records and the applied
   * entry and marks the store as loading; each piece is written in a
   * transaction of its own; the last sets the snapshot's applied entry and
   * lifts the mark. Until then the store is empty or part of a snapshot at
   * applied entry 0: a member that reads it catches up from the log's
   * start, finds it gone and loads a snapshot again, and a store opened
   * with the mark set drops its records first. Resolves with the applied
   * entry and the number of records. `progress` hears, about every
   * `reportEveryMs` (a second), how far the load is.
   */
  async loadSnapshot(
    pieces: AsyncIterable<SnapshotPiece>,
    progress: (p: LoadProgress) => void = () => {},
    reportEveryMs = 1_000,
  ): Promise<{ appliedSeq: number; records: number }> {
    const reporter = new ProgressReporter(progress, 0, reportEveryMs);
    let appliedSeq = -1;
    let records = 0;
    for await (const piece of pieces) {
      if (appliedSeq < 0) {
        // Emptied once the snapshot's first piece is here: a source that cannot be reached leaves the store as it was.
        await this.tail;
        emptyRecords(this.env, this.dbs, true);
      }
      const writes = piece.records.map(writeOf);
      this.env.transactionSync(() => {
        for (const write of writes) this.dbs[write.db].putSync(write.key, write.value);
      });
      appliedSeq = piece.appliedSeq;
      records += writes.length;
      reporter.at(records, piece.total);
    }
    if (appliedSeq < 0) throw new Error("the snapshot was empty");
    this.env.transactionSync(() => {
      this.dbs.meta.putSync(APPLIED_SEQ, appliedSeq);
      this.dbs.meta.removeSync(SNAPSHOT_LOADING);
    });
    reporter.done();
    return { appliedSeq, records };
  }

  /** transactions is the number of write transactions the environment has committed, ever. */
  transactions(): number {
    return (this.env.getStats() as { lastTxnId: number }).lastTxnId;
  }

  async close(): Promise<void> {
    await this.tail.catch(() => undefined);
    await this.env.close();
    await this.lock?.release();
  }
}

/** noop is a handler that does nothing. */
function noop(): void {}

/** emptyRecords drops every record and the applied entry in one transaction, marking the store as loading a snapshot or lifting the mark (loadSnapshot). */
function emptyRecords(env: RootDatabase, dbs: LmdbStore["dbs"], loading: boolean): void {
  env.transactionSync(() => {
    for (const name of DB_NAMES) if (name !== "meta") dbs[name].clearSync();
    dbs.meta.removeSync(APPLIED_SEQ);
    if (loading) dbs.meta.putSync(SNAPSHOT_LOADING, true);
    else dbs.meta.removeSync(SNAPSHOT_LOADING);
  });
}

/** checkDataFile tells whether the store's file exists, and refuses an empty one (truncated). */
function checkDataFile(path: string): boolean {
  const file = dataFile(path);
  if (!existsSync(file)) return false;
  const { size } = statSync(file);
  if (size === 0) throw new StoreOpenError(`store file ${file} is empty (truncated?); refusing to start over it`);
  return true;
}

/**
 * verifyReadable walks the whole store in a child process, so a corrupt file
 * kills the child, not the server. It runs beside the caller: a starting
 * server loads its modules meanwhile.
 */
function verifyReadable(path: string): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, [VERIFIER, path, ...DB_NAMES], { encoding: "utf8", maxBuffer: 1 << 20 }, (error, _stdout, stderr) => {
      if (error === null) return resolve();
      if (error.signal != null) {
        return reject(new StoreOpenError(`store in ${path} is corrupt or truncated: reading it crashed the reader (${error.signal})`));
      }
      reject(new StoreOpenError(`store in ${path} is unreadable: ${stderr.trim() || `verifier exited with ${error.code}`}`));
    });
  });
}

/** initMeta checks the format version of an existing store, or writes it and a new server id into a new one. */
async function initMeta(
  path: string,
  dbs: LmdbStore["dbs"],
  readOnly: boolean,
  migrating: (p: LoadProgress) => void,
): Promise<{ serverId: string; migratedFrom?: number }> {
  const { meta } = dbs;
  const version = meta.get("formatVersion") as number | undefined;
  const serverId = meta.get("serverId") as string | undefined;
  if (version === undefined) {
    const holdsData = dbs.ranks.getKeysCount() + dbs.keys.getKeysCount() + dbs.reservations.getKeysCount() > 0;
    if (readOnly || holdsData) throw new StoreOpenError(`data dir ${path} holds no hf3fs-metadata store (no format version)`);
    const id = randomUUID();
    // One event turn, so one transaction: a store has both or neither.
    await Promise.all([meta.put("serverId", id), meta.put("formatVersion", FORMAT_VERSION)]);
    return { serverId: id };
  }
  let migratedFrom: number | undefined;
  if (version === 1 || version === 2) {
    // See schema.ts; a store opened read-only is read as it is.
    if (!readOnly) {
      migrateParents(dbs, migrating);
      migratedFrom = version;
    }
  } else if (version !== FORMAT_VERSION) {
    throw new StoreOpenError(
      `store in ${path} has format version ${String(version)}, this server reads version ${FORMAT_VERSION}: ${
        Number(version) > FORMAT_VERSION ? "upgrade hf3fs-metadata" : "it is not a store of this server"
      }`,
    );
  }
  if (typeof serverId !== "string") throw new StoreOpenError(`store in ${path} has no server id`);
  return { serverId, migratedFrom };
}

/**
 * isInternalCommitRejection recognizes (and handles) the rejection of a
 * promise lmdb-js makes for itself and nobody can handle: each event
 * turn's write batch starts with an internal write whose promise is
 * rejected, unhandled, when the commit fails (disk full, I/O error), which
 * killed the server before the calls in flight were answered. Our own
 * writes' promises see the same failure, and the store fails (every call
 * UNAVAILABLE STORE_UNAVAILABLE, then exit).
 */
export function isInternalCommitRejection(reason: unknown): boolean {
  if (!(reason instanceof Error && reason.message.startsWith("Commit failed") && "commitError" in reason)) return false;
  ignoreCommitError(reason);
  return true;
}

/**
 * ignoreCommitError handles a failed write's error. lmdb-js gives it a
 * `commitError` promise, rejected with the cause (ENOSPC, EIO) that it also
 * prints; unhandled, that rejection killed the process before the calls in
 * flight were answered.
 */
function ignoreCommitError(error: unknown): void {
  const commitError = (error as { commitError?: unknown } | undefined)?.commitError;
  if (commitError instanceof Promise) commitError.catch(() => undefined);
}

/** inSteps tells a change that LmdbStore commits in steps: a namespace's drop, or a rank's. */
function inSteps(change: Change): boolean {
  return isDrop(change) || isUnrank(change);
}
