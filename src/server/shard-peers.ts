import type { CallOptions } from "@connectrpc/connect";
import type { Etcd3 } from "etcd3";
import { type BatchLimits, Gathering, type Sent } from "../client/gathering.js";
import { LeaderFollowing, type Method } from "../client/leader-following.js";
import { callHeader, LeanTransports } from "../client/lean-transports.js";
import type { ClientTls } from "../client/metadata-client.js";
import type { ShardPart } from "../core/index.js";
import { SHARD_LOCAL_HEADER, UNREACHED_HEADER } from "../protocol/headers.js";
import { ClusterKeys, type LeaderRecord, type MemberRecord } from "../replication/cluster-keys.js";
import { attempts } from "../replication/within.js";
import { type Member, type Topology, topologyOf } from "../service/cluster-service.js";
import { LOOKUPS, type Lookup, missesOf, PendingLookups } from "../service/lookup-misses.js";
import type { MetadataCalls, RequestOf } from "../service/metadata-calls.js";

/** PEERS_MS is how often a member reads every shard's members and leader from etcd. */
const PEERS_MS = 1_000;

/** READ_MS bounds a read of one shard's members from its etcd (in attempts that each go to an endpoint anew). */
const READ_MS = 2_000;

/** RETRY is the backoff between sends of a call to another shard: short, as its failover takes about 2 s. */
const RETRY = { initialBackoffMs: 25, maxBackoffMs: 250 };

/** shardClusterName is the name of shard `index`'s own cluster in etcd, for a cluster split into shards; the cluster's own name when it is not split. */
export function shardClusterName(clusterName: string, part: ShardPart): string {
  return part.count === 1 ? clusterName : `${clusterName}/shard-${part.index}-of-${part.count}`;
}

/** PeerOptions are how a member reaches the other shards. */
export interface PeerOptions {
  readonly clusterName: string;
  readonly part: ShardPart;
  /** holdMs bounds how long a call waits for another shard's leader (--startup-hold). */
  readonly holdMs: number;
  /** token is sent on every call (the member's admin token, when the members have token files); undefined: none. */
  readonly token?: string;
  readonly tls?: ClientTls;
  /** limits are what a member takes of one call (--max-keys-per-call, --max-body-bytes): a Batch of gathered parts stays within them (Gathering). */
  readonly limits: BatchLimits;
  /** pingMs is how often the connections to other shards are PINGed (5 s by default; tests set it longer to see what else moves a held call). */
  readonly pingMs?: number;
  /** readHoldMs is how long another shard may have had no leader in etcd before its part of a lookup is answered as misses (--read-hold; 0: held as any call). */
  readonly readHoldMs?: number;
}

/**
 * ShardPeers are a member's view of its cluster's shards and its ways to
 * the others: each shard's members and leader, read from etcd every
 * PEERS_MS in a cluster split into shards (in one of one shard, when the
 * topology is asked and its last read is older), answered as the
 * cluster's topology (its own shard too), and calls to another shard's
 * leader through LeaderFollowing (the leader read, or the one NOT_LEADER
 * names, the next member after a failure),
 * held through its failovers within holdMs, over one multiplexed HTTP/2
 * connection per member, gathered into Batches as a relay's (Gathering).
 */
export class ShardPeers {
  private readonly followings: (LeaderFollowing | undefined)[];
  /** gatherings send each other shard's parts, together as Batches when they come faster than that shard answers. */
  private readonly gatherings: (Gathering | undefined)[];
  private readonly transports: LeanTransports;
  private readonly reading: NodeJS.Timeout | undefined;
  /** members are each shard's members as last read (none before the first read). */
  private members: Member[][] = [];
  /** readAt is when the last read began (0: never). */
  private readAt = 0;
  /** firstRead is the first read of a cluster split into shards (undefined in one of one shard). */
  private readonly firstRead: Promise<void> | undefined;
  /** inFlight is the read under way: one at a time, so that an older read never lands after a newer one. */
  private inFlight: Promise<void> | undefined;
  /** leaderlessSince is, per shard, when a read first found it without a leader (Date.now(); undefined: it has one, or was not read). */
  private readonly leaderlessSince: (number | undefined)[] = [];
  /** lookups are, per shard, the lookups on their way there, each given up (answered as misses) once the shard had no leader for --read-hold. */
  private readonly lookups: PendingLookups[];
  /** missed hears of each lookup part answered as misses (the server counts them); set by the server. */
  missed: (method: Lookup) => void = () => undefined;

  /**
   * @param etcd is the etcd client of each shard (this member's own, or
   * another etcd cluster's: --shard-etcd-endpoints), and how to close those
   * that are not the member's own.
   */
  constructor(
    private readonly etcd: { of(shard: number): Etcd3; close(): void },
    private readonly options: PeerOptions,
  ) {
    const { count, index } = options.part;
    this.transports = new LeanTransports({ tls: options.tls, header: callHeader(options.token, { [SHARD_LOCAL_HEADER]: "1" }), pingMs: options.pingMs });
    this.followings = Array.from({ length: count }, (_, shard) =>
      shard === index
        ? undefined
        : new LeaderFollowing({
            // No call reaches this placeholder: calls wait (within the hold) until the first read names the shard's members.
            baseUrl: `http://shard-${shard}.unknown`,
            listedOnly: true,
            transportFor: (url) => this.transports.of(url),
            policy: { deadlineMs: options.holdMs, ...RETRY },
            random: Math.random,
            // A leader paused through its failover holds the parts sent to it: they go again once its connection proves silent.
            left: (url) => this.transports.left(url),
          }),
    );
    this.lookups = this.followings.map(() => new PendingLookups());
    this.gatherings = this.followings.map(
      (following) => following && new Gathering((method, request, o, holdMs) => following.call(method, request, o, holdMs), options.limits, options.holdMs),
    );
    // Only a cluster split into shards routes calls by what it reads: one of one shard reads when asked (topology).
    if (count > 1) {
      this.reading = setInterval(() => void this.read(), PEERS_MS);
      this.reading.unref();
      this.firstRead = this.read();
    }
  }

  /** calls are the calls to `shard`'s leader. */
  calls(shard: number): MetadataCalls {
    const gathering = this.gatherings[shard];
    if (gathering === undefined) throw new RangeError(`shard ${shard} is this member's own`);
    return async (method, request, signal) => {
      if (!LOOKUPS.has(method)) {
        const sent = await gathering.call(method as Method, request, { signal }, this.options.holdMs);
        return { response: sent.response as never, serverId: sent.serverId ?? undefined };
      }
      // The shard's own members answer misses too, once they knew no leader for their --read-hold: the mark goes on.
      let marked = false;
      const onHeader = (headers: Headers) => (marked ||= headers.get(UNREACHED_HEADER) === "1");
      const sent = await this.lookup(shard, gathering, method as Lookup, request, { signal, onHeader });
      if (sent === undefined) {
        this.missed(method as Lookup);
        return { response: missesOf(method as Lookup, request as RequestOf<Lookup>) as never, unreached: true };
      }
      return { response: sent.response as never, serverId: sent.serverId ?? undefined, ...(marked ? { unreached: true } : {}) };
    };
  }

  /**
   * lookup sends a lookup's part (LOOKUPS) to its shard as any call, and
   * gives it up (undefined: answered as misses) once the shard has had no
   * leader for --read-hold, as its reads of etcd find: a relay does the same
   * for a shard it reaches no member of. Engines wait on lookups without a
   * deadline; a miss costs them a recompute.
   */
  private lookup(shard: number, gathering: Gathering, method: Lookup, request: unknown, options: CallOptions): Promise<Sent | undefined> {
    if (this.leaderlessFor(shard) >= this.readHoldMs) return Promise.resolve(undefined);
    return this.lookups[shard]!.race(gathering.call(method, request, options, this.options.holdMs));
  }

  /** leaderlessFor is how long the reads of etcd have found `shard` without a leader (-Infinity while it has one). */
  private leaderlessFor(shard: number): number {
    const since = this.leaderlessSince[shard];
    return since === undefined ? Number.NEGATIVE_INFINITY : Date.now() - since;
  }

  /** readHoldMs is --read-hold, Infinity for 0 (lookups held as any call). */
  private get readHoldMs(): number {
    return this.options.readHoldMs ? this.options.readHoldMs : Number.POSITIVE_INFINITY;
  }

  /**
   * topology is the cluster's shards as last read. Split into shards, the
   * reads every PEERS_MS keep it current, and it waits only for the first:
   * a read that one shard's silent etcd holds (READ_MS) does not hold the
   * answer, which relays wait a second for. Of one shard, it is read again
   * first when older than PEERS_MS.
   */
  async topology(): Promise<Topology> {
    if (this.firstRead !== undefined) await this.firstRead;
    else if (Date.now() - this.readAt > PEERS_MS) await this.read();
    return topologyOf(this.options.part, this.members);
  }

  close(): void {
    clearInterval(this.reading);
    this.transports.close();
    this.etcd.close();
  }

  /**
   * read reads each shard's members and leader from etcd, keeps them for
   * the topology, and hands the URLs of another shard's members to its
   * LeaderFollowing (a shard whose read failed keeps what it had).
   */
  private read(): Promise<void> {
    this.inFlight ??= this.readOnce().finally(() => {
      this.inFlight = undefined;
    });
    return this.inFlight;
  }

  /**
   * shardMembers reads each other shard's members from its etcd now, for
   * the status page: the records of those that run, the lasting records of
   * every one it has known (those down among them) and its leader; a shard
   * that etcd did not answer for, the reason. This member's own shard is
   * undefined: its own cluster reads those (ClusterView).
   */
  shardMembers(): Promise<ShardRead[]> {
    return Promise.all(
      this.followings.map((following, shard) =>
        following === undefined ? undefined : this.readShard(shard, true).catch((error: Error) => ({ error: error.message })),
      ),
    );
  }

  /** readOnce reads every shard once (read), and keeps each shard's members as they come: a shard whose read fails keeps what it had. */
  private async readOnce(): Promise<void> {
    this.readAt = Date.now();
    await Promise.all(
      this.followings.map(async (following, shard) => {
        const read = await this.readShard(shard, false).catch(() => undefined);
        if (read === undefined) return;
        const records = read.running.filter((record) => record.url !== "");
        if (following !== undefined && records.length > 0) {
          following.setServers(records.map((record) => record.url));
          const leaderUrl = records.find((record) => record.memberId === read.leaderId)?.url;
          if (leaderUrl !== undefined) following.prefer(leaderUrl);
        }
        this.members[shard] = records.map((record) => ({ id: record.memberId, url: record.url, leader: record.memberId === read.leaderId }));
        if (read.leaderId !== undefined) this.leaderlessSince[shard] = undefined;
        else this.leaderlessSince[shard] ??= this.readAt;
        if (this.leaderlessFor(shard) < this.readHoldMs) return;
        this.lookups[shard]!.giveUp();
      }),
    );
  }

  /**
   * readShard reads one shard's member records and leader from its etcd,
   * and its lasting records when `known`, within READ_MS: an etcd that
   * stops answering (paused, cut off) fails the read, not hold it and every
   * read after it.
   */
  private async readShard(shard: number, known: boolean): Promise<ShardMembers> {
    const keys = new ClusterKeys(shardClusterName(this.options.clusterName, { count: this.options.part.count, index: shard }));
    const kv = this.etcd.of(shard).kv;
    const [running, leader, lasting] = await Promise.all([
      attempts(READ_MS, (o) => kv.range({ key: keys.members, range_end: keys.membersEnd }, o)),
      attempts(READ_MS, (o) => kv.range({ key: keys.leader }, o)),
      known ? attempts(READ_MS, (o) => kv.range({ key: keys.known, range_end: keys.knownEnd }, o)) : undefined,
    ]);
    const records = (kvs: { value: Buffer }[]) => kvs.map((kv) => JSON.parse(kv.value.toString()) as MemberRecord);
    return {
      running: records(running.kvs),
      known: lasting === undefined ? [] : records(lasting.kvs),
      leaderId: leader.kvs[0] === undefined ? undefined : (JSON.parse(leader.kvs[0].value.toString()) as LeaderRecord).memberId,
    };
  }
}

/** ShardRead is what shardMembers read of a shard: its members, why they could not be read, or undefined for the member's own shard. */
export type ShardRead = ShardMembers | { error: string } | undefined;

/** ShardMembers are one shard's members as its etcd holds them. */
export interface ShardMembers {
  /** running are the records of the members that run (each kept under its lease). */
  readonly running: MemberRecord[];
  /** known are the lasting records of every member the shard has known (empty when not read). */
  readonly known: MemberRecord[];
  /** leaderId is the member that holds the shard's leader key, if any. */
  readonly leaderId: string | undefined;
}
