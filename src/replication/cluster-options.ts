import { type NameOf, type OptionsOf, optionTable, type StateOptions } from "../core/options.js";
import type { AccessOptions } from "../service/access-options.js";
import type { StoreOptions } from "../store/store-options.js";

/** CLUSTER_OPTIONS make the server a member of a highly available cluster on etcd (serve-member.ts), and secure its link to etcd. */
export const CLUSTER_OPTIONS = optionTable({
  etcdEndpoints: {
    kind: "string",
    default: "",
  },
  shardEtcdEndpoints: { kind: "string", default: "" },
  /** memberIndex, when given, is the member's place in a set of members (a StatefulSet's pod index): its shard is memberIndex mod shards (resolveMemberShard). */
  memberIndex: { kind: "integer", min: 0, max: 1_000_000, default: 0 },
  clusterName: { kind: "string", default: "default" },
  advertiseUrl: {
    kind: "string",
    default: "",
  },
  standbyCalls: {
    kind: "string",
    choices: ["forward", "refuse"],
    default: "forward",
  },
  leaderLeaseMs: {
    kind: "duration",
    default: 2_000,
  },
  standbyReadLagMs: {
    kind: "duration",
    default: 100,
  },
  readHoldMs: {
    kind: "duration",
    default: 1_000,
  },
  etcdCa: { kind: "string", default: "" },
  etcdCert: { kind: "string", default: "" },
  etcdKey: { kind: "string", default: "" },
  etcdUser: { kind: "string", default: "" },
  etcdPasswordFile: { kind: "string", default: "" },
});

/** ClusterOptions make the server a member of a cluster (CLUSTER_OPTIONS); etcdEndpoints "" runs single-node. */
export type ClusterOptions = OptionsOf<typeof CLUSTER_OPTIONS>;

/** LINK_FIELDS are the options of the member's link to etcd (TLS and auth). */
const LINK_FIELDS = ["etcdCa", "etcdCert", "etcdKey", "etcdUser", "etcdPasswordFile"] as const;

/** URL matches an http(s) URL of a host (and port), as --etcd-endpoints and --advertise-url take. */
const URL = /^https?:\/\/[^/\s]+\/?$/;

/**
 * resolveMemberShard gives a member the shard of its --member-index, when
 * that is given: the index mod --shards, so that one set of 3 × S members
 * numbered from 0 (a StatefulSet's pods) makes S shards of 3, members
 * i, i + S, i + 2S in shard i. A member gives its index or its shard, not
 * both.
 */
export function resolveMemberShard(
  options: Pick<ClusterOptions, "etcdEndpoints" | "memberIndex"> & Pick<StateOptions, "shards" | "shard">,
  name: NameOf,
  given: ReadonlySet<string>,
): void {
  if (!given.has("memberIndex")) return;
  if (options.etcdEndpoints === "") throw new RangeError(`${name("memberIndex")} is for a member of a cluster: give ${name("etcdEndpoints")} too`);
  if (given.has("shard")) {
    throw new RangeError(`give ${name("shard")} or ${name("memberIndex")}, not both: a member's shard is its index mod ${name("shards")}`);
  }
  options.shard = options.memberIndex % options.shards;
}

/** checkCluster throws unless the options of high availability go together, and with the store, the tokens and the shards. */
export function checkCluster(options: ClusterOptions & StoreOptions & AccessOptions & Pick<StateOptions, "shards" | "shard">, name: NameOf): void {
  if (options.etcdEndpoints === "") {
    const stray = [...LINK_FIELDS, "shardEtcdEndpoints" as const].find((field) => options[field] !== "");
    if (stray !== undefined) throw new RangeError(`${name(stray)} is for a member of a cluster: give ${name("etcdEndpoints")} too`);
    return;
  }
  for (const endpoint of options.etcdEndpoints.split(",")) {
    if (!URL.test(endpoint)) throw new RangeError(`${name("etcdEndpoints")} takes URLs like http://127.0.0.1:2379, got "${endpoint}"`);
  }
  if (options.authTokenFile !== "" && options.adminTokenFile === "") {
    throw new RangeError(
      `a cluster member with ${name("authTokenFile")} needs ${name("adminTokenFile")} too: standbys fetch snapshots from the other members with an admin token`,
    );
  }
  if (options.inMemory) {
    throw new RangeError(
      `${name("etcdEndpoints")} needs the durable store (a member keeps the cluster's state in ${name("dataDir")}): drop ${name("inMemory")}`,
    );
  }
  if (!/^[A-Za-z0-9._-]{1,64}$/.test(options.clusterName)) {
    throw new RangeError(`${name("clusterName")} takes 1 to 64 letters, digits, ".", "_" or "-", got "${options.clusterName}"`);
  }
  if (options.advertiseUrl !== "" && !URL.test(options.advertiseUrl)) {
    throw new RangeError(`${name("advertiseUrl")} takes a URL like http://10.0.0.2:18000, got "${options.advertiseUrl}"`);
  }
  if (options.leaderLeaseMs < 1_000 || options.leaderLeaseMs % 1_000 !== 0) {
    throw new RangeError(`${name("leaderLeaseMs")} must be whole seconds, at least 1s (etcd leases count seconds), got ${options.leaderLeaseMs} ms`);
  }
  checkEtcdLink(options, name);
  checkShardEtcd(options, name);
}

/**
 * shardEtcdEndpoints are the etcd endpoints of each shard (--shard-etcd-endpoints, ";" between
 * shards, shard 0's first), or every shard on the member's own (--etcd-endpoints).
 */
export function shardEtcdEndpoints(options: Pick<ClusterOptions, "etcdEndpoints" | "shardEtcdEndpoints"> & Pick<StateOptions, "shards">): string[] {
  if (options.shardEtcdEndpoints === "") return Array.from({ length: options.shards }, () => options.etcdEndpoints);
  return options.shardEtcdEndpoints.split(";").map((group) => group.trim());
}

/** endpointSet names a list of etcd endpoints (URL,URL,...) whatever their order: one etcd cluster, one name. */
export function endpointSet(endpoints: string): string {
  return endpoints
    .split(",")
    .map((endpoint) => endpoint.trim())
    .sort()
    .join(",");
}

/** checkShardEtcd checks --shard-etcd-endpoints: a list of endpoints per shard, this member's shard's being its --etcd-endpoints. */
function checkShardEtcd(options: ClusterOptions & Pick<StateOptions, "shards" | "shard">, name: NameOf): void {
  if (options.shardEtcdEndpoints === "") return;
  const groups = shardEtcdEndpoints(options);
  if (groups.length !== options.shards) {
    throw new RangeError(
      `${name("shardEtcdEndpoints")} names ${groups.length} shards' etcd endpoints (";" between shards), ${name("shards")} is ${options.shards}`,
    );
  }
  for (const endpoint of groups.flatMap((group) => group.split(","))) {
    if (!URL.test(endpoint)) throw new RangeError(`${name("shardEtcdEndpoints")} takes URLs like http://127.0.0.1:2379, got "${endpoint}"`);
  }
  if (endpointSet(groups[options.shard]!) !== endpointSet(options.etcdEndpoints)) {
    throw new RangeError(
      `${name("shardEtcdEndpoints")} gives shard ${options.shard} the etcd endpoints ${groups[options.shard]}, but this member of it runs on ${name("etcdEndpoints")} ${options.etcdEndpoints}`,
    );
  }
}

/** checkEtcdLink checks the options of the member's link to etcd: TLS needs https:// endpoints, and each pair comes whole. */
function checkEtcdLink(options: ClusterOptions, name: NameOf): void {
  const tls = options.etcdCa !== "" || options.etcdCert !== "" || options.etcdKey !== "";
  if (tls && !options.etcdEndpoints.split(",").every((endpoint) => endpoint.startsWith("https://"))) {
    throw new RangeError(`${name("etcdCa")}, ${name("etcdCert")} and ${name("etcdKey")} are for TLS to etcd: give https:// ${name("etcdEndpoints")}`);
  }
  if ((options.etcdCert === "") !== (options.etcdKey === "")) {
    throw new RangeError(`${name("etcdCert")} and ${name("etcdKey")} go together: give both or neither`);
  }
  if (options.etcdCert !== "" && options.etcdCa === "")
    throw new RangeError(`${name("etcdCert")} needs ${name("etcdCa")}, the CA that signed etcd's certificate`);
  if ((options.etcdUser === "") !== (options.etcdPasswordFile === "")) {
    throw new RangeError(`${name("etcdUser")} and ${name("etcdPasswordFile")} go together: give both or neither`);
  }
}
