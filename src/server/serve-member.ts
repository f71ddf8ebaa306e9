import { hostname } from "node:os";
import type { Etcd3, IOptions } from "etcd3";
import { systemClock } from "../core/index.js";
import type { PeerTls } from "../protocol/peer-tls.js";
import { endpointSet, shardEtcdEndpoints } from "../replication/cluster-options.js";
import { etcdClient } from "../replication/etcd-client.js";
import { Member } from "../replication/member.js";
import { keepShardCount } from "../replication/shard-count.js";
import { isOrphanWatchResponse, Watches } from "../replication/watch.js";
import { Leadership } from "../service/leadership.js";
import { readTokens } from "../service/token-file.js";
import { etcdLeanClient } from "./etcd-lean-client.js";
import { cannotStart, runUntilStopped } from "./run-until-stopped.js";
import { type RunningServer, startServer } from "./server.js";
import type { ServerOptions } from "./server-options.js";
import { serverUrl } from "./server-url.js";
import { ShardPeers, shardClusterName } from "./shard-peers.js";
import { openDurable, type Start } from "./start.js";
import { readOptionFile } from "./tls-files.js";

/**
 * serveMember runs a member of a highly available cluster (--etcd-endpoints)
 * on a port bound already: it opens its data dir's store, joins the
 * cluster, serves, and starts following (with a hot state it loads from the
 * store) and campaigning at its advertise URL. Calls wait (--startup-hold)
 * while no leader is known. The serve command imports this module only with
 * --etcd-endpoints, so a single-node start does not load the etcd client.
 */
export async function serveMember({ options, security, port, stopped, logger }: Start): Promise<number> {
  const part = { count: options.shards, index: options.shard };
  // Members reach each other as they are reached: with their own certificate, trusting the CA of the members' (--tls-client-ca).
  const peerTls: PeerTls | undefined = security.tls && { ca: security.tls.clientCa, cert: security.tls.cert, key: security.tls.key };
  let member: Member;
  let peers: ShardPeers | undefined;
  try {
    const local = await openDurable(options.dataDir, logger, { overlappingSync: true, lockWaitMs: options.lockWaitMs }, [isOrphanWatchResponse]);
    const etcdAuth = etcdSecurity(options);
    const clientOptions = { dialTimeout: 2_000, grpcOptions: ETCD_GRPC_OPTIONS, ...etcdAuth };
    const connect = () => etcdClient({ ...clientOptions, hosts: options.etcdEndpoints.split(",") });
    const client = connect();
    // The cluster's number of shards is fixed when it is made: a member started with another is refused before it joins.
    await keepShardCount(client, options.clusterName, part.count).catch(async (error: Error) => {
      client.close();
      await local.close();
      throw error;
    });
    // Watches have a client of their own, made anew should the etcd3 package wedge its watch stream (watch.ts).
    const watches = new Watches(connect);
    // The leader's appends and a standby's questions of the log's end go on a lean client of etcd's KV.Txn (etcd3's stack cost about twice its CPU per append).
    const etcdLean = etcdLeanClient({ ...etcdAuth, hosts: options.etcdEndpoints.split(",") });
    const memberOptions = {
      // Each shard is a cluster of its own in etcd, named after the cluster and its place in it: a member of another
      // shard, or of the same cluster split another way, joins another group, and its data dir another cluster's.
      clusterName: shardClusterName(options.clusterName, part),
      leaderLeaseMs: options.leaderLeaseMs,
      standbyReadLagMs: options.standbyReadLagMs,
      state: options,
      clock: systemClock,
      token: snapshotToken(options),
      peerTls,
      etcdLean,
    };
    member = await Member.join(client, watches, local, new Leadership(options.readHoldMs), memberOptions, logger).catch(async (error: Error) => {
      client.close();
      etcdLean.close();
      watches.close();
      await local.close();
      throw error;
    });
    // Its shard's cluster id already holds the data dir to this shard; the store says which, for inspect.
    if (local.shard.index !== part.index || local.shard.count !== part.count) await local.recordShard(part);
    // Every member answers the cluster's topology; split into shards, its leader sends the keys of the other shards to their leaders.
    const etcd = shardEtcd(shardEtcdEndpoints(options), options.etcdEndpoints, client, (hosts) => etcdClient({ ...clientOptions, hosts }));
    peers = new ShardPeers(etcd, {
      clusterName: options.clusterName,
      part,
      holdMs: options.startupHoldMs,
      token: snapshotToken(options),
      tls: peerTls,
      limits: options,
      readHoldMs: options.readHoldMs,
    });
  } catch (error) {
    return cannotStart(logger, error as Error);
  }
  const server = await startServer(
    member.ledger,
    options,
    { ...security, peerTls, bound: port, leadership: member.leadership, position: () => member.appliedSeq, cluster: member, loads: member.loads, peers },
    logger,
  );
  member.start(advertiseUrlOf(options, server));
  logger.info({ cluster: options.clusterName, clusterId: member.clusterId, memberId: member.memberId }, "cluster: joined");
  return runUntilStopped(options, server, member.ledger.store, security.access, logger, stopped);
}

/**
 * shardEtcd is the etcd client of each shard: the member's own for the
 * shards on its etcd, one more per other etcd cluster (made by `connect`,
 * with the member's TLS and auth), closed with it.
 */
function shardEtcd(groups: readonly string[], own: string, client: Etcd3, connect: (hosts: string[]) => Etcd3): { of(shard: number): Etcd3; close(): void } {
  const clients = new Map<string, Etcd3>([[endpointSet(own), client]]);
  for (const group of groups) if (!clients.has(endpointSet(group))) clients.set(endpointSet(group), connect(group.split(",")));
  return {
    of: (shard) => clients.get(endpointSet(groups[shard]!))!,
    close: () => {
      for (const other of clients.values()) if (other !== client) other.close();
    },
  };
}

/**
 * etcdSecurity is how the member proves itself to etcd and checks etcd:
 * the CA of etcd's certificate and the member's client certificate
 * (--etcd-ca, --etcd-cert, --etcd-key), and etcd's auth (--etcd-user,
 * --etcd-password-file). Without --etcd-ca, https:// endpoints are checked
 * against the system's CAs (the etcd3 client's default).
 */
function etcdSecurity(options: ServerOptions): Pick<IOptions, "credentials" | "auth"> {
  const read = (flag: string, file: string) => readOptionFile(file, `--${flag} file`);
  const security: Pick<IOptions, "credentials" | "auth"> = {};
  if (options.etcdCa !== "") {
    security.credentials = { rootCertificate: read("etcd-ca", options.etcdCa) };
    if (options.etcdCert !== "") {
      security.credentials.certChain = read("etcd-cert", options.etcdCert);
      security.credentials.privateKey = read("etcd-key", options.etcdKey);
    }
  }
  if (options.etcdUser !== "") {
    const password = read("etcd-password-file", options.etcdPasswordFile).toString("utf8").split(/\r?\n/)[0]!;
    security.auth = { username: options.etcdUser, password };
  }
  return security;
}

/** snapshotToken is the first token of the member's token files: it presents it to the member it asks for a snapshot (an admin call). */
function snapshotToken(options: ServerOptions): string | undefined {
  const file = options.adminTokenFile || options.authTokenFile;
  return file === "" ? undefined : readTokens(file)[0];
}

/**
 * advertiseUrlOf is --advertise-url, else the URL the server listens on;
 * on a wildcard address (0.0.0.0, ::) the host name stands for it, since
 * other machines cannot reach a wildcard. Never with a trailing slash: the
 * JSON routes append the request path to it when they redirect there.
 */
function advertiseUrlOf(options: ServerOptions, server: RunningServer): string {
  if (options.advertiseUrl !== "") return options.advertiseUrl.replace(/\/$/, "");
  if (options.host !== "0.0.0.0" && options.host !== "::") return server.url;
  return serverUrl(hostname(), server.port, options.tlsCert !== "");
}

/** ETCD_GRPC_OPTIONS let a catch-up read return up to 32 log entries of 1 MB each. */
const ETCD_GRPC_OPTIONS = { "grpc.max_receive_message_length": 64 << 20 };
