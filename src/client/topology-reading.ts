import { createClient, type Transport } from "@connectrpc/connect";
import { ClusterService, type GetTopologyResponse } from "../../gen/hf3fs/metadata/v1/cluster_pb.js";
import type { CallLimits } from "../core/index.js";

/** ASK_TIMEOUT_MS bounds one member's answer of the topology. */
const ASK_TIMEOUT_MS = 1_000;

/** Read is a topology and the member that answered it. */
export interface Read {
  readonly topology: GetTopologyResponse;
  readonly url: string;
}

/**
 * readTopology asks the members at `urls`, one after the other, for the
 * cluster's topology (ClusterService.GetTopology), and gives the first
 * answer that names every shard; undefined when none answers so (down, or
 * servers too old to tell: the caller keeps what it has).
 */
export async function readTopology(urls: Iterable<string>, transportFor: (url: string) => Transport): Promise<Read | undefined> {
  for (const url of new Set(urls)) {
    const topology = await createClient(ClusterService, transportFor(url))
      .getTopology({}, { timeoutMs: ASK_TIMEOUT_MS })
      .catch(() => undefined);
    if (topology !== undefined && topology.shards.length === topology.shardCount) return { topology, url };
  }
  return undefined;
}

/** shardMembers are each shard's members' URLs, leader first; undefined while a shard's members are unknown (a single node names only its own). */
export function shardMembers(topology: GetTopologyResponse): string[][] | undefined {
  const shards = topology.shards.map((shard) => shard.members.map((member) => member.url));
  return shards.length > 0 && shards.every((members) => members.length > 0) ? shards : undefined;
}

/** callLimits are the limits a router holds a whole call to, as the topology names them; undefined from members too old to name them (each shard then holds its part). */
export function callLimits(topology: GetTopologyResponse): CallLimits | undefined {
  const limits = topology.limits;
  if (limits === undefined || limits.maxKeysPerCall === 0 || limits.maxKeyBytes === 0) return undefined;
  return { maxKeysPerCall: limits.maxKeysPerCall, maxKeyBytes: limits.maxKeyBytes };
}
