import type { ICompare } from "etcd3";
import type { LoadStatus } from "../store/load-progress.js";

/**
 * ClusterKeys names the etcd keys of one cluster, all under
 * `/hf3fs-metadata/<cluster name>/`:
 *
 *   id            the cluster's id: made by its first member, kept by every member's store
 *   leader        the leader's LeaderRecord, put with the leader's lease
 *   members/<id>  each member's MemberRecord, put with its lease
 *   known/<id>    each member's last MemberRecord, put every few seconds without a lease: a member that is down, until forgotten
 *   log/<seq>     the replicated log (log-codec.ts); seq in 16 hex digits, so key order is seq order
 */
export class ClusterKeys {
  readonly prefix: string;
  readonly id: Buffer;
  readonly leader: Buffer;
  readonly members: Buffer;
  readonly log: Buffer;
  /** logEnd is the end of the log's key range (exclusive). */
  readonly logEnd: Buffer;
  readonly membersEnd: Buffer;
  readonly known: Buffer;
  readonly knownEnd: Buffer;

  constructor(readonly clusterName: string) {
    this.prefix = `/hf3fs-metadata/${clusterName}/`;
    this.id = Buffer.from(`${this.prefix}id`);
    this.leader = Buffer.from(`${this.prefix}leader`);
    this.members = Buffer.from(`${this.prefix}members/`);
    this.membersEnd = Buffer.from(`${this.prefix}members0`); // "0" follows "/"
    this.known = Buffer.from(`${this.prefix}known/`);
    this.knownEnd = Buffer.from(`${this.prefix}known0`);
    this.log = Buffer.from(`${this.prefix}log/`);
    this.logEnd = Buffer.from(`${this.prefix}log0`);
  }

  /**
   * heldBy is the fence of every write of a leader's term: the leader key
   * is still the one it put (create_revision `termRevision`). A deposed
   * leader's write fails it.
   */
  heldBy(termRevision: string): ICompare & { key: Buffer; create_revision: string } {
    return { key: this.leader, target: "Create", result: "Equal", create_revision: termRevision };
  }

  /** absent is the compare of a create-if-absent: `key` does not exist. */
  absent(key: Buffer): ICompare {
    return { key, target: "Create", result: "Equal", create_revision: 0 };
  }

  /** member is the key of a member's record. */
  member(memberId: string): Buffer {
    return Buffer.from(`${this.prefix}members/${memberId}`);
  }

  /** knownMember is the key of a member's lasting record (known/<id>). */
  knownMember(memberId: string): Buffer {
    return Buffer.from(`${this.prefix}known/${memberId}`);
  }

  /** logEntry is the key of the log entry of sequence number seq. */
  logEntry(seq: number): Buffer {
    return Buffer.from(`${this.prefix}log/${seq.toString(16).padStart(16, "0")}`);
  }

  /** seqOf reads the sequence number of a log entry's key. */
  seqOf(key: Buffer): number {
    return Number.parseInt(key.subarray(this.log.length).toString(), 16);
  }
}

/** LeaderRecord is the value of the leader key. */
export interface LeaderRecord {
  memberId: string;
  url: string;
}

/** MemberRecord is the value of a member's key, refreshed about twice a second. */
export interface MemberRecord {
  memberId: string;
  url: string;
  /** role is "leader" or "standby". */
  role: string;
  /** appliedSeq is the last log entry the member's store holds. */
  appliedSeq: number;
  /** atMs is the member's wall clock when it wrote this record. */
  atMs: number;
  /** loading is the long load the member runs (its standby state, a snapshot); absent when none, in a lasting record (known/<id>), and in records of older versions. */
  loading?: LoadStatus;
}
