import type { MetadataState, NamespaceStatsView, ShardPart } from "../core/index.js";
import type { MemberRecord } from "../replication/cluster-keys.js";
import type { Topology } from "../service/cluster-service.js";
import type { LoadStatus } from "../store/load-progress.js";
import type { ClusterView } from "./metrics.js";
import type { ShardRead } from "./shard-peers.js";
import type { HistorySample, StatusHistory } from "./status-history.js";

/** STATUS_NAMESPACES bounds the namespaces the status page shows (the first, by name). */
const STATUS_NAMESPACES = 100;

/** MemberLine is one member as the status page shows it. */
export interface MemberLine {
  memberId: string;
  url: string;
  role: string;
  appliedSeq: number;
  lag: number | null;
  /** loading is the long load the member runs (its standby state, a snapshot), if any. */
  loading?: LoadStatus;
}

/** ServerStatus is what a server's status page shows (GET /status.json). */
export interface ServerStatus {
  kind: "server";
  url: string;
  serverId: string;
  cluster?: { members: MemberLine[] };
  /** loading is the long load this server runs now (its store, or as a member its standby state or a snapshot), if any. */
  loading?: LoadStatus;
  namespaces: NamespaceStatsView[];
  /** calls counts the calls by method since the process started; the page shows their rates. */
  calls: Record<string, number>;
  /** self is this member of a cluster: its id, its advertise URL and its role; leader, the leader it knows of (itself when leading). */
  self?: { memberId: string; url: string; role: string };
  leader?: { memberId: string; url: string };
  /** history is what the page charts: a sample every `everyMs` (StatusHistory). */
  history?: { everyMs: number; samples: readonly HistorySample[] };
  /** shard is this server's shard, in a cluster split into more than one: its namespaces count the pages that shard holds. */
  shard?: { index: number; count: number };
  /** shards are the cluster's shards, when it is split into more than one. */
  shards?: ShownShard[];
}

/** ShownShard is one shard of a cluster split into shards, as the page shows it: its members' URLs, and which leads. */
export interface ShownShard {
  index: number;
  members: readonly { url: string; leader: boolean }[];
  /** lines are its members as a member's page lists them (role, applied, lag, load; those down too): a server's page, not a relay's. */
  lines?: MemberLine[];
  /** unread says why its members could not be read from its etcd, when they could not. */
  unread?: string;
}

/** shownShards are a topology's shards as the page shows them, with each other shard's members as read from its etcd when given (serverStatus adds its own shard's); undefined for a cluster of one shard. */
export function shownShards(topology: Topology, reads?: readonly ShardRead[]): ShownShard[] | undefined {
  if ((topology.shardCount ?? 1) <= 1) return undefined;
  return (topology.shards ?? []).map((shard) => {
    const index = shard.index ?? 0;
    const members = (shard.members ?? []).map((m) => ({ url: m.url ?? "", leader: m.leader ?? false }));
    const read = reads?.[index];
    if (read === undefined) return { index, members };
    return "error" in read ? { index, members, unread: read.error } : { index, members, lines: memberLines(read.running, read.known) };
  });
}

/** StatusParts are what a server's status is read from. */
export interface StatusParts {
  url: string;
  serverId: string;
  state: MetadataState;
  calls: Record<string, number>;
  /** cluster is the member's own cluster (its shard's), when it is one. */
  cluster?: ClusterView;
  loading?: LoadStatus;
  history?: StatusHistory;
  /** part is the server's shard, in a cluster split into more than one. */
  part?: ShardPart;
  shards?: ShownShard[];
}

/** serverStatus reads a server's status: its state's first namespaces, its cluster's members (down ones too), its call counts, its load under way. */
export async function serverStatus({ url, serverId, state, calls, cluster, loading, history, part, shards }: StatusParts): Promise<ServerStatus> {
  const status: ServerStatus = {
    kind: "server",
    url,
    serverId,
    namespaces: statusNamespaces(state),
    calls,
    ...(part && part.count > 1 && { shard: { index: part.index, count: part.count } }),
    ...(shards && { shards }),
    ...(loading && { loading }),
    ...(history && { history: { everyMs: history.everyMs, samples: history.samples } }),
  };
  if (cluster === undefined) return status;
  const [running, known] = await Promise.all([cluster.members(), cluster.knownMembers()]);
  const leader = running.find((m) => m.role === "leader");
  status.self = { memberId: cluster.memberId, url: cluster.advertise, role: cluster.leading() ? "leader" : "standby" };
  if (leader !== undefined) status.leader = { memberId: leader.memberId, url: leader.url };
  status.cluster = { members: memberLines(running, known) };
  // Its own shard's members are its cluster's, read once.
  const own = part === undefined ? undefined : status.shards?.[part.index];
  if (own !== undefined) own.lines = status.cluster.members;
  return status;
}

/** memberLines are a cluster's members as the page lists them: those that run, then those it has known that do not (down), each one's lag behind the one that leads. */
function memberLines(running: readonly MemberRecord[], known: readonly MemberRecord[]): MemberLine[] {
  const live = new Set(running.map((m) => m.memberId));
  const leader = running.find((m) => m.role === "leader");
  const line = (m: MemberRecord, role: string): MemberLine => ({
    memberId: m.memberId,
    url: m.url,
    role,
    appliedSeq: m.appliedSeq,
    lag: leader === undefined ? null : Math.max(0, leader.appliedSeq - m.appliedSeq),
    ...(m.loading && { loading: m.loading }),
  });
  return [...running.map((m) => line(m, m.role)), ...known.filter((m) => !live.has(m.memberId)).map((m) => line(m, "down"))];
}

/** statusNamespaces are the namespaces the status page shows (and charts): the first STATUS_NAMESPACES, by name, as they stand (peekStats). */
export function statusNamespaces(state: MetadataState): NamespaceStatsView[] {
  return state
    .peekStats()
    .sort((a, b) => (a.namespace < b.namespace ? -1 : a.namespace > b.namespace ? 1 : 0))
    .slice(0, STATUS_NAMESPACES);
}
