import { randomUUID } from "node:crypto";
import type { Etcd3 } from "etcd3";
import type { Leadership } from "../service/leadership.js";
import type { ClusterKeys, LeaderRecord } from "./cluster-keys.js";
import type { EtcdSession } from "./etcd-session.js";
import { aborted, sleep } from "./sleep.js";
import { type Watches, watchAfter } from "./watch.js";
import { attempts } from "./within.js";

/** LEADER_RECHECK_MS is how often a waiting member reads the leader key even when its watch says nothing. */
const LEADER_RECHECK_MS = 2_000;
/** CAMPAIGN_RETRY_MS is the pause before a member that could not campaign (no leader, but not caught up) looks again. */
const CAMPAIGN_RETRY_MS = 50;

/**
 * Election is a member's side of the leader key: the key holds the
 * leader's record under the leader's lease, and its create revision fences
 * the leader's writes (ClusterKeys.heldBy) for as long as that term lasts.
 * A member campaigns whenever no one leads and its store is caught up
 * (Leadership.caughtUp); meanwhile it names the leader to the edge.
 */
export class Election {
  /** leaderUrl is the leader's URL, "" when this member leads or no leader is known. */
  leaderUrl = "";
  /** stopped resolves once the member stops. */
  private readonly stopped: Promise<void>;

  /**
   * @param record is the leader key's value should this member win: its id and its advertised URL.
   * @param stop aborts when the member stops.
   */
  constructor(
    private readonly client: Etcd3,
    private readonly watches: Watches,
    private readonly keys: ClusterKeys,
    private readonly record: () => LeaderRecord,
    private readonly leadership: Leadership,
    private readonly stop: AbortSignal,
  ) {
    this.stopped = aborted(stop);
  }

  /**
   * awaitTurn waits, while the lease holds, until this member is elected
   * (it resolves with the leader key's create revision: the term's fence)
   * or the lease lapses or the member stops (undefined).
   */
  async awaitTurn(session: EtcdSession): Promise<string | undefined> {
    while (session.valid() && !this.stop.aborted) {
      const res = await session.call((options) => this.client.kv.range({ key: this.keys.leader }, options));
      const current = res.kvs[0];
      if (current === undefined) {
        if (this.leadership.caughtUp) {
          const won = await this.campaign(session);
          if (won !== undefined) return won;
        }
        await sleep(CAMPAIGN_RETRY_MS, this.stop);
        continue;
      }
      const leader = JSON.parse(current.value.toString()) as LeaderRecord;
      const own = this.record();
      if (leader.memberId === own.memberId && (current.lease === session.id || leader.url === own.url)) {
        // This member's own key: under this lease, a campaign that won though its answer was lost; under another, a
        // term of this member at this address that is over (this process stepped down, or it is the process restarted
        // after a kill: the data dir's lock and the port say the old one is gone). Waiting for that lease to expire
        // would leave the cluster without a leader for its TTL, longer while etcd elects (each election renews every
        // lease). A copy of this data dir serving elsewhere names another URL, and is waited for as any leader.
        if (current.lease === session.id) return current.create_revision;
        await this.resign(session, current.create_revision);
        continue;
      }
      this.leaderUrl = leader.url;
      this.leadership.follow(this.leaderUrl, this.leadership.caughtUp);
      await this.leaderKeyChange(res.header.revision, session);
    }
    return undefined;
  }

  /** campaign puts the leader key with this member's lease unless it exists; it resolves with its create revision when it won. */
  private async campaign(session: EtcdSession): Promise<string | undefined> {
    // A repeat of a campaign that won fails its compare: the member then reads the leader key, its own, and leads.
    const res = await session.call((options) =>
      this.client.kv.txn(
        {
          compare: [this.keys.absent(this.keys.leader)],
          success: [{ request_put: { key: this.keys.leader, value: Buffer.from(JSON.stringify(this.record())), lease: session.id } }],
        },
        options,
      ),
    );
    return res.succeeded ? res.header.revision : undefined;
  }

  /** resign deletes the leader key of a term of this member's that is over, unless another term has put it since (its create revision). */
  private async resign(session: EtcdSession, createRevision: string): Promise<void> {
    await session.call((options) =>
      this.client.kv.txn(
        {
          compare: [this.keys.heldBy(createRevision)],
          success: [{ request_delete_range: { key: this.keys.leader } }],
        },
        options,
      ),
    );
  }

  /**
   * leaderKeyChange resolves when the leader key changes after `revision`,
   * LEADER_RECHECK_MS passed, the lease lapses, or the member stops. The
   * recheck counts from the start, not from when etcd confirmed the watch:
   * a watch on a stalled etcd member takes up to OPEN_MS to open or fail,
   * and a standby that waited for it named a leader gone for that long,
   * holding the calls it forwards.
   */
  private async leaderKeyChange(revision: string, session: EtcdSession): Promise<void> {
    let changed!: () => void;
    const change = new Promise<void>((resolve) => (changed = resolve));
    const opening = this.watches.open((client) => watchAfter(client.watch().key(this.keys.leader), revision), {
      put: changed,
      delete: changed,
      ended: changed,
    });
    // A watch that did not open is a reason to read the key again soon (Watches renewed its client).
    opening.catch(() => sleep(CAMPAIGN_RETRY_MS, this.stop).then(changed));
    try {
      await Promise.race([change, session.lost, this.stopped, sleep(LEADER_RECHECK_MS, this.stop)]);
    } finally {
      // Closed once it opened, without waiting for it: the next read must not wait on a stalled member either.
      void opening.then(
        (close) => close(),
        () => undefined,
      );
    }
  }
}

/** ensureClusterId reads the cluster's id, making it if this is the cluster's first member. */
export async function ensureClusterId(client: Etcd3, keys: ClusterKeys): Promise<string> {
  const id = randomUUID();
  // A repeat of a put that landed fails its compare and reads the id it put.
  const res = await attempts(10_000, (options) =>
    client.kv.txn(
      {
        compare: [keys.absent(keys.id)],
        success: [{ request_put: { key: keys.id, value: Buffer.from(id) } }],
        failure: [{ request_range: { key: keys.id } }],
      },
      options,
    ),
  );
  return res.succeeded ? id : res.responses[0]!.response_range!.kvs[0]!.value.toString();
}
