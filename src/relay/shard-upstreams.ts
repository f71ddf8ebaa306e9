import type { CallLimits, MetadataError } from "../core/index.js";
import type { ShownShard } from "../server/status-view.js";
import type { MetadataCalls } from "../service/metadata-calls.js";
import { Notifier } from "../service/notifier.js";
import { shardRouter } from "../service/shard-router.js";
import type { Upstream } from "./upstream.js";

/** MakeUpstream makes the upstream of one shard's members (comma-separated), sent its own parts when `shardLocal`. */
export type MakeUpstream = (urls: string, shardLocal: boolean) => Upstream;

/**
 * ShardUpstreams are a relay's upstreams, one per shard of the cluster,
 * and the router in front of them. They start from --upstream's lists
 * (one: a cluster of one shard, or members that route themselves) and
 * follow the cluster's topology: another number of shards makes the
 * upstreams anew (the old ones close once their held calls are spent),
 * other members are handed to a shard's upstream, other limits to the
 * router (each call held whole to them before it is split, as a member
 * holds it). Calls in between are answered right either way, as every
 * member routes what is not its own.
 */
export class ShardUpstreams {
  private upstreams: Upstream[];
  private route: MetadataCalls;
  private readonly changed = new Notifier();
  /** retired are upstreams replaced, closed once the calls they hold are spent (holdMs) or with the relay. */
  private readonly retired = new Map<NodeJS.Timeout, Upstream[]>();

  constructor(
    groups: readonly string[],
    private readonly make: MakeUpstream,
    private readonly holdMs: number,
  ) {
    this.upstreams = groups.map((urls) => make(urls, groups.length > 1));
    this.route = shardRouter(this.upstreams.map((u) => u.calls));
  }

  /** calls are the cluster's calls, each split among the shards it touches. */
  readonly calls: MetadataCalls = (method, request, signal) => this.route(method, request, signal);

  /** count is the number of shards the relay sends to now. */
  get count(): number {
    return this.upstreams.length;
  }

  /** shown are the shards as the status page shows them (the server each sends to as its leader, once reached); undefined for one. */
  shown(): ShownShard[] | undefined {
    if (this.upstreams.length === 1) return undefined;
    return this.upstreams.map((u, index) => ({
      index,
      members: u.servers.map((url) => ({ url, leader: url === u.going })),
    }));
  }

  /** going are the servers calls go to, one per shard that a server answers in. */
  going(): string[] {
    return this.upstreams.flatMap((u) => (u.going === undefined ? [] : [u.going]));
  }

  /** silent are the servers, of every shard, that the relay's watches found silent. */
  silent(): string[] {
    return this.upstreams.flatMap((u) => u.silent);
  }

  /** first is shard 0's upstream (the one an SRV name's members go to). */
  get first(): Upstream {
    return this.upstreams[0]!;
  }

  /** caughtUp, refusal and next are what the relay's health reports: SERVING while it reaches every shard (a call's keys may belong to any of them). */
  get caughtUp(): boolean {
    return this.upstreams.every((u) => u.reach.caughtUp);
  }

  get refusal(): MetadataError | undefined {
    return this.upstreams.find((u) => u.reach.refusal !== undefined)?.reach.refusal;
  }

  /** next resolves when any shard's reach changes, or the shards do. */
  next(signal: AbortSignal): Promise<void> {
    return Promise.race([this.changed.next(signal), ...this.upstreams.map((u) => u.reach.next(signal))]);
  }

  /** follow takes the members of each shard (a list per shard, leader first, none empty: shardMembers) and the limits on a call, as the cluster's topology names them. */
  follow(shards: readonly (readonly string[])[], limits?: CallLimits): void {
    const regrouped = shards.length !== this.upstreams.length;
    if (regrouped) {
      const old = this.upstreams;
      this.upstreams = shards.map((members) => this.make(members.join(","), shards.length > 1));
      const timer = setTimeout(() => {
        this.retired.delete(timer);
        for (const u of old) u.close();
      }, this.holdMs);
      timer.unref();
      this.retired.set(timer, old);
    } else {
      for (const [shard, members] of shards.entries()) {
        const upstream = this.upstreams[shard]!;
        if ([...members].sort().join(",") !== [...upstream.servers].sort().join(",")) upstream.setUrls(members);
      }
    }
    this.route = shardRouter(
      this.upstreams.map((u) => u.calls),
      limits,
    );
    if (regrouped) this.changed.notify();
  }

  close(): void {
    for (const [timer, old] of this.retired) {
      clearTimeout(timer);
      for (const u of old) u.close();
    }
    this.retired.clear();
    for (const u of this.upstreams) u.close();
  }
}
