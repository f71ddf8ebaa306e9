import { createClient } from "@connectrpc/connect";
import { ClusterService, type GetTopologyResponse } from "../../gen/hf3fs/metadata/v1/cluster_pb.js";
import type { LeanTransports } from "../client/lean-transports.js";

/** TOPOLOGY_MS is how often a relay asks its upstream for the cluster's topology. */
export const TOPOLOGY_MS = 1_000;

/** ASK_TIMEOUT_MS bounds one member's answer. */
const ASK_TIMEOUT_MS = 1_000;

/**
 * TopologyFollowing asks the cluster for its topology (ClusterService) at
 * once and every TOPOLOGY_MS: the members it knows first, then `seeds`
 * (--upstream's), the first that answers; and hands `follow` each shard's
 * members, leader first. Servers that do not answer it (older ones) leave
 * the relay on its --upstream.
 */
export class TopologyFollowing {
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private known: string[] = [];
  /** answered is the member that answered last: asked first next time. */
  private answered: string | undefined;

  constructor(
    private readonly seeds: () => readonly string[],
    private readonly transports: LeanTransports,
    private readonly follow: (shards: string[][]) => void,
  ) {}

  /** last is the last topology read, undefined before the first. */
  last: GetTopologyResponse | undefined;

  /** run reads the topology now and then every TOPOLOGY_MS, until stop; its timer keeps no process alive. */
  run(): void {
    const read = async () => {
      const topology = await this.ask();
      if (this.stopped) return;
      if (topology !== undefined) {
        this.last = topology;
        const shards = topology.shards.map((shard) => shard.members.map((member) => member.url));
        this.known = shards.flat();
        this.follow(shards);
      }
      this.timer = setTimeout(read, TOPOLOGY_MS);
      this.timer.unref();
    };
    void read();
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  /** ask asks one member after the other until one answers; undefined when none does. */
  private async ask(): Promise<GetTopologyResponse | undefined> {
    const first = this.answered === undefined ? [] : [this.answered];
    for (const url of new Set([...first, ...this.known, ...this.seeds()])) {
      const answer = await createClient(ClusterService, this.transports.of(url))
        .getTopology({}, { timeoutMs: ASK_TIMEOUT_MS })
        .catch(() => undefined);
      if (answer !== undefined && answer.shards.length === answer.shardCount) {
        this.answered = url;
        return answer;
      }
    }
    return undefined;
  }
}
