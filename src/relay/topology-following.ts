import type { LeanTransports } from "../client/lean-transports.js";
import { callLimits, readTopology, shardMembers } from "../client/topology-reading.js";
import type { CallLimits } from "../core/index.js";

/**
 * TOPOLOGY_MS is how often a relay asks its upstream for the cluster's
 * topology: for members that join or leave, and the number of shards. A
 * shard's leader moving is not waited for: the health watches of its
 * members (Upstream) move its calls as soon as the new leader serves.
 */
export const TOPOLOGY_MS = 10_000;

/**
 * SETTLING_MS is how soon a relay asks again after an answer of shards
 * that was not the one before (the first included): a cluster that is starting or
 * changing names its members over a few seconds (each member's own view
 * of etcd is up to a second old), and a relay that kept a partial list for
 * TOPOLOGY_MS would send a shard's reads only to the members it knew.
 */
const SETTLING_MS = 1_000;

/**
 * TopologyFollowing asks the cluster for its topology (ClusterService) at
 * once, then every SETTLING_MS until two answers agree, and every
 * TOPOLOGY_MS from then on: the members it knows first, then `seeds`
 * (--upstream's), the first that answers; and hands `follow` each shard's
 * members, leader first, when there are more than one, with the limits
 * the answering member holds a call to. Servers that do not answer it
 * (older ones), and clusters of one shard, leave the relay on its
 * --upstream.
 */
export class TopologyFollowing {
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private known: string[] = [];
  /** answered is the member that answered last: asked first next time. */
  private answered: string | undefined;
  /** last is the last answer's shards, as compared with the next (undefined: none yet). */
  private last: string | undefined;

  constructor(
    private readonly seeds: () => readonly string[],
    private readonly transports: LeanTransports,
    private readonly follow: (shards: string[][], limits: CallLimits | undefined) => void,
  ) {}

  /** run reads the topology now and then as the class says, until stop; its timer keeps no process alive. */
  run(): void {
    const read = async () => {
      let settled = true;
      const first = this.answered === undefined ? [] : [this.answered];
      const answer = await readTopology([...first, ...this.known, ...this.seeds()], (url) => this.transports.of(url));
      if (this.stopped) return;
      if (answer !== undefined) {
        this.answered = answer.url;
        // A cluster of one shard stays on --upstream: a single node names itself by the address it listens on, which may not be the one reached.
        const shards = answer.topology.shardCount > 1 ? shardMembers(answer.topology) : undefined;
        const limits = callLimits(answer.topology);
        const seen = JSON.stringify([shards, limits]);
        settled = shards === undefined || seen === this.last;
        this.last = seen;
        if (shards !== undefined) {
          this.known = shards.flat();
          this.follow(shards, limits);
        }
      }
      this.timer = setTimeout(read, settled ? TOPOLOGY_MS : SETTLING_MS);
      this.timer.unref();
    };
    void read();
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }
}
