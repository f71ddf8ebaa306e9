import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, type ServiceImpl } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { type MemberLoad, MemberLoadSchema, MemberRole, ReplicationService } from "../../gen/hf3fs/metadata/internal/v1/replication_pb.js";
import type { Change } from "../core/index.js";
import type { PeerTls } from "../protocol/peer-tls.js";
import type { LmdbStore, SnapshotPiece } from "../store/lmdb-store.js";
import type { LoadStatus } from "../store/load-progress.js";
import type { MemberRecord } from "./cluster-keys.js";
import { decodeGroup, encodeGroup } from "./log-codec.js";

/** memberLoad is a member's load under way as Status reports it. */
function memberLoad({ task, records, total, secondsLeft }: LoadStatus): MemberLoad {
  return create(MemberLoadSchema, { task, records: BigInt(records), total: BigInt(total), secondsLeft: secondsLeft ?? undefined });
}

/** SNAPSHOT_RECORDS is how many records one piece of a snapshot holds. */
const SNAPSHOT_RECORDS = 20_000;

/** ReplicationSource is what ReplicationService answers from: the member (a snapshot only while it is caught up), its store and etcd's records of the members. */
export interface ReplicationSource {
  readonly clusterId: string;
  readonly clusterName: string;
  readonly memberId: string;
  /** caughtUp is true while the member leads, or follows with its store loaded and the log applied to its end. */
  caughtUp(): boolean;
  readonly local: LmdbStore;
  members(): Promise<MemberRecord[]>;
  knownMembers(): Promise<MemberRecord[]>;
  forget(memberId: string): Promise<"running" | "unknown" | "forgotten">;
}

/**
 * replicationService serves ReplicationService: Snapshot streams the
 * member's store as it is at one moment (one LMDB read transaction), in
 * pieces of SNAPSHOT_RECORDS records, while the member leads or is a
 * caught-up standby (a standby's store is the log's state at the entry it
 * holds, as the leader's is); Status reports the members. The
 * edge checks their tokens first, as "replication.Snapshot" (an admin
 * call) and "replication.Status" (any token).
 */
export function replicationService(source: ReplicationSource, limits: SnapshotLimits = SNAPSHOT_LIMITS): ServiceImpl<typeof ReplicationService> {
  return {
    async status() {
      const [running, known] = await Promise.all([source.members(), source.knownMembers()]).catch((error: Error) => {
        throw new ConnectError(`cannot read the members from etcd: ${error.message}`, Code.Unavailable);
      });
      const live = new Set(running.map((m) => m.memberId));
      const down = known.filter((m) => !live.has(m.memberId));
      const status = (m: MemberRecord, role: MemberRole) => ({
        memberId: m.memberId,
        url: m.url,
        role,
        appliedSeq: BigInt(m.appliedSeq),
        publishedAtMs: BigInt(m.atMs),
        loading: m.loading === undefined ? undefined : memberLoad(m.loading),
      });
      return {
        clusterName: source.clusterName,
        clusterId: source.clusterId,
        answeredBy: source.memberId,
        members: [
          ...running.map((m) => status(m, m.role === "leader" ? MemberRole.LEADER : MemberRole.STANDBY)),
          ...down.map((m) => status(m, MemberRole.DOWN)),
        ].sort((a, b) => a.memberId.localeCompare(b.memberId)),
      };
    },
    async forget(req) {
      const outcome = await source.forget(req.memberId).catch((error: Error) => {
        throw new ConnectError(`cannot reach etcd: ${error.message}`, Code.Unavailable);
      });
      if (outcome === "running") throw new ConnectError(`member ${req.memberId} runs: only a member that is down can be forgotten`, Code.FailedPrecondition);
      if (outcome === "unknown") throw new ConnectError(`the cluster knows no member ${req.memberId}`, Code.NotFound);
      return {};
    },
    async *snapshot(req, ctx) {
      if (req.clusterId !== source.clusterId) {
        throw new ConnectError(`this member belongs to cluster ${source.clusterId}, not ${req.clusterId}`, Code.FailedPrecondition);
      }
      if (!source.caughtUp()) throw new ConnectError("this member is not caught up with the log: ask another for a snapshot", Code.FailedPrecondition);
      const snapshot = new BoundedSnapshot(source.local.snapshot(), limits, ctx.signal);
      try {
        const appliedSeq = BigInt(snapshot.appliedSeq);
        const totalRecords = BigInt(snapshot.total);
        let piece: Change[] = [];
        for (let record = snapshot.next(); record !== undefined; record = snapshot.next()) {
          piece.push(record);
          if (piece.length < SNAPSHOT_RECORDS) continue;
          yield { appliedSeq, records: encodeGroup(piece), totalRecords };
          snapshot.progressed();
          piece = [];
        }
        yield { appliedSeq, records: encodeGroup(piece), totalRecords };
      } finally {
        snapshot.end("done");
      }
    },
  };
}

/** SnapshotLimits bound how long one Snapshot stream may hold the member's read transaction. */
export interface SnapshotLimits {
  /** stallMs: a reader that takes no piece for this long ends the stream. */
  readonly stallMs: number;
  /** deadlineMs: no stream lasts longer, however steadily read. */
  readonly deadlineMs: number;
}

/** SNAPSHOT_LIMITS are the limits of `serve`: 30 s without a piece read, 10 min in all. */
const SNAPSHOT_LIMITS: SnapshotLimits = { stallMs: 30_000, deadlineMs: 600_000 };

/**
 * BoundedSnapshot is a store snapshot whose read transaction ends, at the
 * latest, when its reader goes away, stalls (stallMs without taking a
 * piece: flow control keeps the stream from going on) or runs past
 * deadlineMs. An open LMDB read transaction keeps the store from reusing
 * every page written since, so one reader that stopped reading grew the
 * serving member's store by hundreds of megabytes until it failed. Once ended, no
 * record is read again: next() throws DEADLINE_EXCEEDED (or CANCELED).
 */
class BoundedSnapshot {
  private ended: string | undefined;
  private readonly stall: NodeJS.Timeout;
  private readonly deadline: NodeJS.Timeout;
  private readonly onAbort = () => this.end("the reader went away");

  constructor(
    private readonly snapshot: { appliedSeq: number; total: number; records: Generator<Change>; done(): void },
    limits: SnapshotLimits,
    private readonly signal: AbortSignal,
  ) {
    this.stall = setTimeout(() => this.end(`the reader took no piece for ${limits.stallMs} ms`), limits.stallMs);
    this.deadline = setTimeout(() => this.end(`the snapshot took more than ${limits.deadlineMs} ms`), limits.deadlineMs);
    this.stall.unref();
    this.deadline.unref();
    signal.addEventListener("abort", this.onAbort, { once: true });
    if (signal.aborted) this.onAbort();
  }

  /** total is how many records the snapshot holds in all. */
  get total(): number {
    return this.snapshot.total;
  }

  get appliedSeq(): number {
    return this.snapshot.appliedSeq;
  }

  /** next is the next record, undefined after the last; it throws once the snapshot ended early. */
  next(): Change | undefined {
    if (this.ended !== undefined) {
      throw new ConnectError(`the snapshot ended: ${this.ended}`, this.signal.aborted ? Code.Canceled : Code.DeadlineExceeded);
    }
    const next = this.snapshot.records.next();
    return next.done ? undefined : next.value;
  }

  /** progressed says the reader took a piece: the stall timer starts again. */
  progressed(): void {
    if (this.ended === undefined) this.stall.refresh();
  }

  /** end ends the read transaction now (idempotent). */
  end(why: string): void {
    if (this.ended !== undefined) return;
    this.ended = why;
    clearTimeout(this.stall);
    clearTimeout(this.deadline);
    this.signal.removeEventListener("abort", this.onAbort);
    this.snapshot.done();
  }
}

/** PIECE_MS is how long a member loading a snapshot waits for each piece before it gives up on the member that sends it (paused, or gone without closing its connection), as the sender gives up on a reader (SnapshotLimits.stallMs). */
const PIECE_MS = 30_000;

/** fetchSnapshot asks the member at url for its state, and yields it piece by piece as it arrives (LmdbStore.loadSnapshot writes each); it fails once no piece came for pieceMs. */
export async function* fetchSnapshot(
  url: string,
  clusterId: string,
  token: string | undefined,
  peerTls: PeerTls | undefined,
  signal: AbortSignal,
  pieceMs = PIECE_MS,
): AsyncGenerator<SnapshotPiece> {
  const client = createClient(ReplicationService, createGrpcTransport({ baseUrl: url, nodeOptions: peerTls === undefined ? undefined : { ...peerTls } }));
  const headers = token === undefined ? undefined : { authorization: `Bearer ${token}` };
  const stalled = new AbortController();
  const stall = setTimeout(() => stalled.abort(), pieceMs);
  try {
    for await (const piece of client.snapshot({ clusterId }, { headers, signal: AbortSignal.any([signal, stalled.signal]) })) {
      stall.refresh();
      yield { appliedSeq: Number(piece.appliedSeq), records: decodeGroup(Buffer.from(piece.records)), total: Number(piece.totalRecords) };
    }
  } catch (error) {
    if (stalled.signal.aborted && !signal.aborted) throw new Error(`${url} sent no piece of its snapshot for ${pieceMs} ms`);
    throw error;
  } finally {
    clearTimeout(stall);
  }
}
