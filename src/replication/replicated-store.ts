import type { Change } from "../core/index.js";
import type { LmdbStore } from "../store/lmdb-store.js";
import type { Store } from "../store/store.js";

/** Committer is what a ReplicatedStore commits through: the member, which appends to the log while it leads. */
export interface Committer {
  commit(changes: readonly Change[]): Promise<void>;
  close(): Promise<void>;
}

/**
 * ReplicatedStore is the Store of a member: a call's changes are durable
 * once they are in the cluster's log (LogWriter), and only the leader
 * commits. Its server id is the cluster's: the state outlives any member.
 */
export class ReplicatedStore implements Store {
  readonly failed: Promise<Error>;

  constructor(
    private readonly member: Committer,
    readonly serverId: string,
    private readonly local: LmdbStore,
    /** etcd is the member's etcd clients (its calls' and its watches'), closed last. */
    private readonly etcd: readonly { close(): void }[],
  ) {
    this.failed = local.failed;
  }

  commit(changes: readonly Change[]): Promise<void> {
    return this.member.commit(changes);
  }

  async close(): Promise<void> {
    await this.member.close();
    await this.local.close();
    for (const client of this.etcd) client.close();
  }
}
