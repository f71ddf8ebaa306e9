import { Code, ConnectError, createClient, type ServiceImpl } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { MemberRole, ReplicationService } from "../../gen/hf3fs/metadata/internal/v1/replication_pb.js";
import type { Change } from "../core/change.js";
import type { LmdbStore, SnapshotPiece } from "../store/lmdb-store.js";
import type { MemberRecord } from "./cluster-keys.js";
import { decodeGroup, encodeGroup } from "./log-codec.js";

/** SNAPSHOT_RECORDS is how many records one piece of a snapshot holds. */
const SNAPSHOT_RECORDS = 20_000;

/** ReplicationSource is what ReplicationService answers from: the member (a snapshot only while it leads), its store and etcd's records of the members. */
export interface ReplicationSource {
  readonly clusterId: string;
  readonly clusterName: string;
  readonly memberId: string;
  leading(): boolean;
  readonly local: LmdbStore;
  members(): Promise<MemberRecord[]>;
}

/**
 * replicationService serves ReplicationService: Snapshot streams the
 * leader's store as it is at one moment (one LMDB read transaction), in
 * pieces of SNAPSHOT_RECORDS records; Status reports the members. The
 * edge checks their tokens first, as "replication.Snapshot" (an admin
 * call) and "replication.Status" (any token).
 */
export function replicationService(source: ReplicationSource): ServiceImpl<typeof ReplicationService> {
  return {
    async status() {
      const members = await source.members().catch((error: Error) => {
        throw new ConnectError(`cannot read the members from etcd: ${error.message}`, Code.Unavailable);
      });
      return {
        clusterName: source.clusterName,
        clusterId: source.clusterId,
        answeredBy: source.memberId,
        members: members.map((m) => ({
          memberId: m.memberId,
          url: m.url,
          role: m.role === "leader" ? MemberRole.LEADER : MemberRole.STANDBY,
          appliedSeq: BigInt(m.appliedSeq),
          publishedAtMs: BigInt(m.atMs),
        })),
      };
    },
    async *snapshot(req) {
      if (req.clusterId !== source.clusterId) {
        throw new ConnectError(`this member belongs to cluster ${source.clusterId}, not ${req.clusterId}`, Code.FailedPrecondition);
      }
      if (!source.leading()) throw new ConnectError("this member does not lead: ask the leader for a snapshot", Code.FailedPrecondition);
      const snapshot = source.local.snapshot();
      try {
        const appliedSeq = BigInt(snapshot.appliedSeq);
        let piece: Change[] = [];
        for (const record of snapshot.records) {
          piece.push(record);
          if (piece.length < SNAPSHOT_RECORDS) continue;
          yield { appliedSeq, records: encodeGroup(piece) };
          piece = [];
        }
        yield { appliedSeq, records: encodeGroup(piece) };
      } finally {
        snapshot.done();
      }
    },
  };
}

/** fetchSnapshot asks the leader at leaderUrl for its state, and yields it piece by piece as it arrives (LmdbStore.loadSnapshot writes each). */
export async function* fetchSnapshot(leaderUrl: string, clusterId: string, token: string | undefined, signal: AbortSignal): AsyncGenerator<SnapshotPiece> {
  const client = createClient(ReplicationService, createGrpcTransport({ baseUrl: leaderUrl }));
  const headers = token === undefined ? undefined : { authorization: `Bearer ${token}` };
  for await (const piece of client.snapshot({ clusterId }, { headers, signal })) {
    yield { appliedSeq: Number(piece.appliedSeq), records: decodeGroup(Buffer.from(piece.records)) };
  }
}
