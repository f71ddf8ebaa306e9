import { create } from "@bufbuild/protobuf";
import type { CallOptions, Transport } from "@connectrpc/connect";
import { MetadataService } from "../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { type CallLimits, MetadataError as CoreError } from "../core/index.js";
import { SHARD_LOCAL_HEADER } from "../protocol/headers.js";
import { namespaceOf, toConnectError } from "../service/error-table.js";
import type { MetadataCalls } from "../service/metadata-calls.js";
import { shardRouter } from "../service/shard-router.js";
import type { Method } from "./leader-following.js";
import type { ShardLink } from "./shard-link.js";
import { callLimits, readTopology, shardMembers } from "./topology-reading.js";

/** TOPOLOGY_MS is how old the client's view of the shards may grow while it makes calls before it reads it again. */
const TOPOLOGY_MS = 1_000;

/** ShardCalls make a call on a cluster of shards: each shard its part, the answers merged. */
export type ShardCalls = (method: Method, request: unknown, callOptions: CallOptions | undefined) => Promise<{ response: unknown }>;

/**
 * ShardRouting is a client's view of a cluster's shards: read from its
 * members (ClusterService.GetTopology) before the first call, then again
 * at most every TOPOLOGY_MS while calls are made, without holding them. A
 * cluster of more than one shard gets a ShardLink per shard (its members,
 * its leader followed, the shard's mark on every call so that it answers
 * its part alone), and each call is split among them as a relay splits it
 * (shardRouter), held whole first to the limits the topology names. Until
 * a member told it, or when it has one shard, the client calls as it
 * would without routing.
 */
export class ShardRouting {
  private links: ShardLink[] | undefined;
  /** limits are the members' limits on a whole call, as the topology named them; undefined from members too old to name them. */
  private limits: CallLimits | undefined;
  private readAt: number | undefined;
  private reading: Promise<void> | undefined;
  /** transports are the ones topology reads go over, one per member (each its connection), made on first use. */
  private readonly transports = new Map<string, Transport>();

  /**
   * @param transportFor makes the transport to one member (called once per member).
   * @param now is the clock the reads' age is told by (Date.now; tests give their own).
   */
  constructor(
    private readonly seeds: readonly string[],
    private readonly transportFor: (url: string) => Transport,
    private readonly link: (baseUrl: string, header: Record<string, string>) => ShardLink,
    private readonly now: () => number = Date.now,
  ) {}

  /** shards are the calls split among the shards; undefined while the client calls as if the cluster were one shard. */
  async shards(): Promise<ShardCalls | undefined> {
    if (this.readAt === undefined) await this.read();
    else if (this.now() - this.readAt > TOPOLOGY_MS) void this.read();
    const { links, limits } = this;
    if (links === undefined) return undefined;
    return async (method, request, callOptions) => {
      const parts = links.map(
        (link) =>
          ((m: Method, r: unknown, signal?: AbortSignal) =>
            link.call(m, r, { ...callOptions, signal: signal ?? callOptions?.signal }).then((response) => ({ response }))) as unknown as MetadataCalls,
      );
      const message = create(MetadataService.method[method].input, request as never);
      return shardRouter(parts, limits)(method, message as never, callOptions?.signal).catch((error: unknown) => {
        // A call the router refused itself (its checks) is refused as a server refuses it: a code and an ErrorInfo.
        throw error instanceof CoreError ? toConnectError(error, namespaceOf(message)) : error;
      });
    };
  }

  /** read asks the members known, then the seeds, for the topology, and follows the first answer that names every shard's members. */
  private read(): Promise<void> {
    this.reading ??= (async () => {
      const read = await readTopology([...this.urls, ...this.seeds], (url) => this.transportOf(url));
      const shards = read && shardMembers(read.topology);
      if (read !== undefined && shards !== undefined && shards.length > 1) {
        this.follow(shards);
        this.limits = callLimits(read.topology);
      }
      this.readAt = this.now();
    })().finally(() => {
      this.reading = undefined;
    });
    return this.reading;
  }

  /** transportOf is the one transport to a member: a read each second over a new one would open a connection each second. */
  private transportOf(url: string): Transport {
    let transport = this.transports.get(url);
    if (transport === undefined) {
      transport = this.transportFor(url);
      this.transports.set(url, transport);
    }
    return transport;
  }

  /** urls are the members of every shard the links call. */
  private urls: string[] = [];

  /** follow takes each shard's members: the links are made on the first topology, and handed the members anew after. */
  private follow(shards: string[][]): void {
    this.urls = shards.flat();
    if (this.links === undefined || this.links.length !== shards.length) {
      this.links = shards.map((members) => this.link(members.join(","), { [SHARD_LOCAL_HEADER]: "1" }));
      return;
    }
    for (const [shard, members] of shards.entries()) this.links[shard]!.setServers(members);
  }
}
