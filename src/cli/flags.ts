import type { RelayOptions } from "../relay/relay-options.js";
import { defaultServerOptions, type ServerOptions } from "../server/server-options.js";

/** Flag is how the command line names an option and what its help says of it. */
export interface Flag {
  /** flag names it on the command line (--flag) and in the environment (HF3FS_METADATA_FLAG). */
  readonly flag: string;
  readonly help: string;
  /** defaultHelp is how help words the default where its value alone does not say it (e.g. "the system's CAs"). */
  readonly defaultHelp?: string;
}

/**
 * FLAGS are the flags of `serve` and `relay`, by the option each sets: the
 * command line's vocabulary, kept here, apart from the options' meaning,
 * defaults and bounds (each concern's table). An option without a flag
 * does not compile.
 */
export const FLAGS: { readonly [F in keyof ServerOptions | keyof RelayOptions]: Flag } = {
  host: { flag: "host", help: "address to listen on" },
  port: { flag: "port", help: "TCP port (0: any free port); under systemd's socket activation, the socket unit's port" },
  maxConnections: { flag: "max-connections", help: "connections at once at most; more are closed as they come" },
  maxStreamsPerConnection: { flag: "max-streams-per-connection", help: "concurrent HTTP/2 streams (calls) per connection at most" },
  idleTimeoutMs: { flag: "idle-timeout", help: "a connection without a call in flight this long is closed" },
  http2KeepaliveMs: { flag: "http2-keepalive", help: "an HTTP/2 connection silent this long is pinged, and closed unless it answers within as long again" },
  shutdownTimeoutMs: {
    flag: "shutdown-timeout",
    help: "how long shutdown waits for calls in flight; the port stays open, and new connections are served, while any is, unless a process waiting for the port takes it over first",
  },
  portWaitMs: {
    flag: "port-wait",
    help: "how long to wait for the port while another process holds it (a restart's previous one, still draining its calls; or one still serving, which hands the port over as it stops); 0: refuse at once",
  },
  dataDir: { flag: "data-dir", help: "directory of the durable store" },
  inMemory: { flag: "in-memory", help: "keep state in memory only (lost on exit)" },
  lockWaitMs: {
    flag: "lock-wait",
    help: "how long to wait for another process to release the data dir (a restart's previous one, still draining); calls wait at the port meanwhile; 0: refuse at once",
  },
  reservationTtlMs: { flag: "reservation-ttl", help: "how long a reserved page waits for ConfirmWrite" },
  readLeaseTtlMs: { flag: "read-lease-ttl", help: "how long GetLocations protects a key from eviction and its pages from reuse" },
  incompleteTtlMs: { flag: "incomplete-ttl", help: "how long a key may stay confirmed on only some ranks before its pages are reclaimed" },
  maxKeysPerCall: { flag: "max-keys-per-call", help: "keys (and pages) per call at most" },
  maxKeyBytes: { flag: "max-key-bytes", help: "UTF-8 bytes per key and per namespace name at most" },
  maxRanksPerNamespace: { flag: "max-ranks-per-namespace", help: "ranks per namespace at most (and so world_size)" },
  maxNamespaces: { flag: "max-namespaces", help: "namespaces per server at most" },
  eviction: { flag: "eviction", help: "what makes room: prefix (keys no prefix match reaches, then leaves, then LRU) or lru (plain LRU)" },
  evictHighWatermark: { flag: "evict-high-watermark", help: "a rank with more than this fraction of its pages held is evicted in the background (1: never)" },
  evictLowWatermark: { flag: "evict-low-watermark", help: "the fraction of held pages background eviction brings a rank down to" },
  shards: {
    flag: "shards",
    help: "the shards this server's cluster is split into: each key and page belongs to one shard (docs/contract.md, Shards), and this server hands out only its shard's pages; relays (which learn the shards from any member), and a cluster member's leader, route each call's keys to their shards; fixed in etcd when the cluster is made; 1: not split",
  },
  shard: { flag: "shard", help: "the shard this server (or cluster member) serves, from 0 to --shards - 1" },
  vllmWorldSize: {
    flag: "vllm-world-size",
    help: "world_size of the namespaces vLLM's routes create (its tensor-parallel size): a rank at or above it is refused; 0: every rank initialized counts",
  },
  vllmNamespace: {
    flag: "vllm-namespace",
    help: "the namespace of vLLM's calls (vLLM names none): one per model, so that models of other sizes share a server; vLLM's /clear and /reset then act on it alone. A body that names a namespace keeps it",
    defaultHelp: "kv, and vLLM's /clear clears every namespace",
  },
  maxBodyBytes: {
    flag: "max-body-bytes",
    help: "bytes per request body at most",
    defaultHelp: `${defaultServerOptions.maxBodyBytes}, what the largest call within the key limits needs`,
  },
  maxBufferedBytes: {
    flag: "max-buffered-bytes",
    help: "bytes of requests not yet served (bodies, decompressed messages) the server holds at most",
    defaultHelp: "4 bodies at --max-body-bytes",
  },
  maxBufferedBytesPerConnection: {
    flag: "max-buffered-bytes-per-connection",
    help: "bytes of unfinished request bodies one connection holds at most",
    defaultHelp: "1 body at --max-body-bytes",
  },
  maxUnsentBytes: {
    flag: "max-unsent-bytes",
    help: "bytes of HTTP/2 answers ended but not taken by their callers (who stopped reading) the server holds at most; past it, the connection holding the most loses them",
    defaultHelp: "as --max-buffered-bytes",
  },
  requestTimeoutMs: {
    flag: "request-timeout",
    help: "time to receive a request's headers and body, and for a caller to take its HTTP/2 answer; slower senders and readers are cut",
  },
  startupHoldMs: { flag: "startup-hold", help: "how long a call waits while the state loads or no cluster leader is known, before UNAVAILABLE; 0: no wait" },
  overloadLagMs: { flag: "overload-lag", help: "shed new calls (UNAVAILABLE, REASON_OVERLOADED) while the event loop is more than this behind; 0: never" },
  authTokenFile: { flag: "auth-token-file", help: "file of tokens (one per line) that every call needs; re-read on SIGHUP" },
  adminTokenFile: {
    flag: "admin-token-file",
    help: "file of tokens that Clear, DeleteKeys, DropRank, ResetNamespace and the JSON clear/delete/drop/reset routes need (they may do everything); re-read on SIGHUP",
  },
  clearTokenFile: {
    flag: "clear-token-file",
    help: "file of tokens that may make every worker call and Clear, DeleteKeys and the JSON clear/delete routes, but not DropRank or ResetNamespace (for a relay that passes engines' clear on); re-read on SIGHUP",
  },
  metricsAuth: { flag: "metrics-auth", help: "GET /metrics needs a token too" },
  tlsCert: { flag: "tls-cert", help: "PEM certificate (chain) of TLS on the port, for every protocol; re-read on SIGHUP" },
  tlsKey: { flag: "tls-key", help: "PEM private key of --tls-cert" },
  tlsClientCa: { flag: "tls-client-ca", help: "PEM CA that client certificates must be signed by (mTLS)" },
  logLevel: { flag: "log-level", help: "fatal, error, warn, info, debug, trace or silent" },
  etcdEndpoints: { flag: "etcd-endpoints", help: "etcd client URLs (URL,URL,...): run as a member of a highly available cluster; empty: single-node" },
  shardEtcdEndpoints: {
    flag: "shard-etcd-endpoints",
    help: "for a cluster split into shards whose shards keep their logs on etcd clusters of their own: each shard's etcd client URLs, shard 0's first, separated by semicolons (URL,URL;URL,URL); this member's shard's must be its --etcd-endpoints; empty: every shard on --etcd-endpoints",
  },
  memberIndex: {
    flag: "member-index",
    help: "this member's place among a cluster's members numbered from 0, as a StatefulSet numbers its pods (the label apps.kubernetes.io/pod-index): it serves shard <index> mod --shards, so 3 × S members numbered 0 to 3S - 1 make S shards of 3; give it or --shard, not both",
    defaultHelp: "none: the member serves --shard",
  },
  clusterName: { flag: "cluster-name", help: "the cluster's name; its etcd keys live under /hf3fs-metadata/<name>/" },
  advertiseUrl: { flag: "advertise-url", help: "URL at which clients and the other members reach this member (empty: the URL it listens on)" },
  standbyCalls: {
    flag: "standby-calls",
    help: "what a standby does with a call: forward it to the leader (holding it while none is known), or refuse it (NOT_LEADER naming the leader; the JSON routes answer 307) for clients that route themselves; either way a standby answers the reads it holds within --standby-read-lag itself",
  },
  leaderLeaseMs: { flag: "leader-lease", help: "TTL of each member's etcd lease (whole seconds): how long a dead leader is waited for" },
  standbyReadLagMs: {
    flag: "standby-read-lag",
    help: "how far behind the log's end a standby may be and still answer BatchExists and GetStats itself (while reads come, it asks etcd every half of it whether it holds the log's end; the first read after 10 s without any goes to the leader, as does a read that names a later position or reaches a standby further behind); 0: every read goes to the leader",
  },
  etcdCa: { flag: "etcd-ca", help: "PEM CA that etcd's certificate must be signed by (https:// endpoints)" },
  etcdCert: { flag: "etcd-cert", help: "PEM client certificate for etcd (its --client-cert-auth)" },
  etcdKey: { flag: "etcd-key", help: "PEM private key of --etcd-cert" },
  etcdUser: { flag: "etcd-user", help: "etcd user to log in as (etcd's auth)" },
  etcdPasswordFile: { flag: "etcd-password-file", help: "file whose first line is --etcd-user's password" },
  upstream: {
    flag: "upstream",
    help: "the server, or a cluster's members by their advertise URLs, comma-separated (http://10.0.0.1:18000,http://10.0.0.2:18000,...), or by a DNS SRV name that lists them, read again every 30 s (srv+https://_grpc._tcp.hf3fs-metadata-members.NS.svc.cluster.local: each record is a member at https://TARGET:PORT, as it advertises itself); a cluster split into shards is learned from any member and followed (ClusterService), or named by each shard's members, shard 0's first, separated by semicolons (http://a0:18000,http://a1:18000;http://b0:18000,http://b1:18000)",
    defaultHelp: "none: required",
  },
  holdMs: { flag: "hold", help: "how long a call waits for the upstream to answer (failovers, restarts, elections) before UNAVAILABLE (503)" },
  readHoldMs: {
    flag: "read-hold",
    help: "how long no server of a shard may have answered a relay's calls, or a cluster member may have known no leader of its shard (etcd out of reach) or of another shard, before BatchExists and GetLocations (vLLM's batch_exists and get_locations, SGLang's exists and get_page_indices) are answered at once with those keys as misses (absent, no page; header hf3fs-unreached: 1), instead of held for --hold or --startup-hold: engines wait on these lookups without a deadline, and a miss costs a recompute; 0: they are held as any call",
  },
  reads: {
    flag: "reads",
    help: "where a cluster's reads (BatchExists, GetStats) go: to its caught-up standbys in turn, sparing the leader (members: a standby answers those it holds within its --standby-read-lag, never before a write the relay acknowledged), or all to the leader (leader)",
  },
  upstreamTokenFile: {
    flag: "upstream-token-file",
    help: "file whose first line is the token the relay sends upstream as `authorization: Bearer` on every call",
  },
  upstreamCa: { flag: "upstream-ca", help: "PEM CA the relay trusts for https upstreams", defaultHelp: "the system's CAs" },
  upstreamCert: { flag: "upstream-cert", help: "PEM client certificate the relay presents upstream (mTLS)" },
  upstreamKey: { flag: "upstream-key", help: "PEM private key of --upstream-cert" },
};
