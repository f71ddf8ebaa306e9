import { create, type MessageInitShape } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import {
  CallLimitsSchema,
  type ClusterService,
  type GetTopologyResponseSchema,
  KeyHash,
  PagePlacement,
  type ShardMember,
} from "../../gen/hf3fs/metadata/v1/cluster_pb.js";
import type { CallLimits, ShardPart } from "../core/index.js";

/** Topology is a GetTopology answer. */
export type Topology = MessageInitShape<typeof GetTopologyResponseSchema>;

/** Member is one member of a shard as a topology names it. */
export type Member = Pick<ShardMember, "id" | "url" | "leader">;

/**
 * topologyOf is the answer of a member of shard `part.index`, given each
 * shard's members as it knows them (a shard's leader first, then the
 * others by id): the rules are core/shards.ts's.
 */
export function topologyOf(part: ShardPart, members: readonly (readonly Member[])[]): Topology {
  return {
    shardCount: part.count,
    shard: part.index,
    keyHash: KeyHash.MURMUR3_X86_32,
    pagePlacement: PagePlacement.MODULO,
    shards: Array.from({ length: part.count }, (_, index) => ({
      index,
      members: [...(members[index] ?? [])].sort((a, b) => Number(b.leader) - Number(a.leader) || a.id.localeCompare(b.id)),
    })),
  };
}

/** singleNodeTopology is the answer of a single node: its shard's one member and leader, the other shards' members unknown to it. */
export function singleNodeTopology(part: ShardPart, url: string): Topology {
  return topologyOf(
    part,
    Array.from({ length: part.count }, (_, shard) => (shard === part.index ? [{ id: "", url, leader: true }] : [])),
  );
}

/** withLimits is a topology that names the limits its member holds a call to (CallLimits: routers hold a whole call to them before they split it). */
export function withLimits(topology: Topology, { maxKeysPerCall, maxKeyBytes }: CallLimits): Topology {
  return { ...topology, limits: create(CallLimitsSchema, { maxKeysPerCall, maxKeyBytes }) };
}

/** clusterService answers ClusterService from `topology`, which says what the process knows now. */
export function clusterService(topology: () => Topology | Promise<Topology>): ServiceImpl<typeof ClusterService> {
  return { getTopology: async () => await topology() };
}
