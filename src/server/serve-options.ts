import { parseArgs } from "node:util";
import { defaultStateOptions, EVICTION_POLICIES, type StateOptions } from "../core/state-options.js";
import { checkMaxRanks, checkWatermarks } from "../core/validate.js";
import { ENVELOPE_BYTES } from "../protocol/envelope.js";
import { parseDuration } from "./duration.js";

/** ServerOptions configure `hf3fs-metadata serve`. */
export interface ServerOptions extends StateOptions {
  /** host is the address to listen on. Defaults to 127.0.0.1. */
  host: string;
  /** port is the TCP port; 0 picks a free one. Defaults to 18000. */
  port: number;
  /** dataDir is where the durable store lives. Defaults to ./data. */
  dataDir: string;
  /** inMemory keeps the state in memory only, lost on exit. Defaults to false. */
  inMemory: boolean;
  /** maxBodyBytes bounds a request body, any protocol. Defaults to what the largest call allowed by the key limits needs (maxBodyBytesFor). */
  maxBodyBytes: number;
  /** maxBufferedBytes bounds the bytes of all unfinished request bodies. Defaults to 4 bodies at maxBodyBytes. */
  maxBufferedBytes: number;
  /** maxBufferedBytesPerConnection bounds those of one connection. Defaults to 1 body at maxBodyBytes. */
  maxBufferedBytesPerConnection: number;
  /** http2KeepaliveMs: an HTTP/2 connection silent this long is pinged, and closed unless it answers within as long again. Defaults to 10 s. */
  http2KeepaliveMs: number;
  /** vllmWorldSize is the world_size the vLLM routes declare for the namespaces they create; 0 (the default): every rank initialized counts. */
  vllmWorldSize: number;
  /** overloadLagMs sheds new calls while the event loop is more than this behind; 0: never (the default). */
  overloadLagMs: number;
  /** maxConnections bounds the connections at once. Defaults to 4,096. */
  maxConnections: number;
  /**
   * maxStreamsPerConnection bounds the concurrent HTTP/2 streams of a connection (clients queue the
   * rest). Defaults to 100, the least RFC 9113 recommends: one socket read then brings at most that
   * many new calls per connection, which bounds how long a flood of tiny calls holds the event loop.
   */
  maxStreamsPerConnection: number;
  /** requestTimeoutMs bounds the time to receive a request's headers and body. Defaults to 60 s. */
  requestTimeoutMs: number;
  /** idleTimeoutMs closes a connection without a call in flight for this long. Defaults to 5 min. */
  idleTimeoutMs: number;
  /** shutdownTimeoutMs bounds how long SIGTERM waits for calls in flight. Defaults to 10 s. */
  shutdownTimeoutMs: number;
  /** startupHoldMs bounds how long a call waits for the state to load, or for a cluster to elect a leader; 0: it fails at once. Defaults to 60 s. */
  startupHoldMs: number;
  /** authTokenFile holds the tokens every MetadataService call and JSON route needs; "" for none (open). */
  authTokenFile: string;
  /** adminTokenFile holds the tokens Clear, DeleteKeys and the JSON clear and delete routes need; "" for none. */
  adminTokenFile: string;
  /** metricsAuth makes GET /metrics need a token too. Defaults to false. */
  metricsAuth: boolean;
  /** tlsCert and tlsKey are the PEM files of TLS on the port (both or neither); "" for cleartext. */
  tlsCert: string;
  tlsKey: string;
  /** tlsClientCa is the PEM file of the CA that client certificates must be signed by (mTLS); "" for none. */
  tlsClientCa: string;
  /** logLevel is pino's level. Defaults to info. */
  logLevel: string;
  /** etcdEndpoints, comma-separated etcd client URLs, turn on high availability; "" (the default) runs single-node. */
  etcdEndpoints: string;
  /** clusterName names the cluster: its etcd keys live under /hf3fs-metadata/<name>/. Defaults to "default". */
  clusterName: string;
  /** advertiseUrl is how clients and the other members reach this member; "" (the default): the URL the server listens on. */
  advertiseUrl: string;
  /** leaderLeaseMs is the TTL of each member's etcd lease, so the longest a cluster goes without a leader after one dies. Defaults to 2 s. */
  leaderLeaseMs: number;
  /** etcdCa is the PEM file of the CA that etcd's certificate must be signed by (https:// endpoints); "" for the system's CAs. */
  etcdCa: string;
  /** etcdCert and etcdKey are the PEM files of the member's client certificate for etcd's --client-cert-auth (both or neither). */
  etcdCert: string;
  etcdKey: string;
  /** etcdUser and etcdPasswordFile log the member in to etcd's auth (both or neither); the file's first line is the password. */
  etcdUser: string;
  etcdPasswordFile: string;
}

type Kind = "string" | "integer" | "duration" | "boolean" | "fraction";

/** OPTIONS lists every option of `serve`: its flag, kind, default and help. The env variable is HF3FS_METADATA_<FLAG>. */
export const OPTIONS: { flag: string; field: keyof ServerOptions; kind: Kind; help: string }[] = [
  { flag: "host", field: "host", kind: "string", help: "address to listen on" },
  { flag: "port", field: "port", kind: "integer", help: "TCP port (0: any free port)" },
  { flag: "data-dir", field: "dataDir", kind: "string", help: "directory of the durable store" },
  { flag: "in-memory", field: "inMemory", kind: "boolean", help: "keep state in memory only (lost on exit)" },
  { flag: "reservation-ttl", field: "reservationTtlMs", kind: "duration", help: "how long a reserved page waits for ConfirmWrite" },
  { flag: "read-lease-ttl", field: "readLeaseTtlMs", kind: "duration", help: "how long GetLocations protects a key" },
  { flag: "incomplete-ttl", field: "incompleteTtlMs", kind: "duration", help: "how long a key may stay confirmed on only some ranks" },
  { flag: "max-keys-per-call", field: "maxKeysPerCall", kind: "integer", help: "keys per call at most" },
  { flag: "max-key-bytes", field: "maxKeyBytes", kind: "integer", help: "UTF-8 bytes per key at most" },
  { flag: "max-ranks-per-namespace", field: "maxRanksPerNamespace", kind: "integer", help: "ranks per namespace at most (and so world_size)" },
  {
    flag: "vllm-world-size",
    field: "vllmWorldSize",
    kind: "integer",
    help: "world_size of the namespaces vLLM's routes create (its tensor-parallel size): a rank at or above it is refused; 0: every rank initialized counts",
  },
  { flag: "max-namespaces", field: "maxNamespaces", kind: "integer", help: "namespaces per server at most" },
  {
    flag: "eviction",
    field: "eviction",
    kind: "string",
    help: "what makes room: prefix (keys no prefix match reaches, then leaves, then LRU) or lru (plain LRU)",
  },
  {
    flag: "evict-high-watermark",
    field: "evictHighWatermark",
    kind: "fraction",
    help: "a rank with more than this fraction of its pages held is evicted in the background (1: never)",
  },
  { flag: "evict-low-watermark", field: "evictLowWatermark", kind: "fraction", help: "the fraction of held pages background eviction brings a rank down to" },
  {
    flag: "max-body-bytes",
    field: "maxBodyBytes",
    kind: "integer",
    help: "bytes per request body at most (default: what the largest call within the key limits needs)",
  },
  {
    flag: "max-buffered-bytes",
    field: "maxBufferedBytes",
    kind: "integer",
    help: "bytes of requests not yet served (bodies, decompressed messages) the server holds at most (default: 4 bodies at --max-body-bytes)",
  },
  {
    flag: "max-buffered-bytes-per-connection",
    field: "maxBufferedBytesPerConnection",
    kind: "integer",
    help: "bytes of unfinished request bodies one connection holds at most (default: 1 body at --max-body-bytes)",
  },
  {
    flag: "http2-keepalive",
    field: "http2KeepaliveMs",
    kind: "duration",
    help: "an HTTP/2 connection silent this long is pinged, and closed unless it answers within as long again",
  },
  {
    flag: "overload-lag",
    field: "overloadLagMs",
    kind: "duration",
    help: "shed new calls (UNAVAILABLE, REASON_OVERLOADED) while the event loop is more than this behind; 0: never",
  },
  { flag: "max-connections", field: "maxConnections", kind: "integer", help: "connections at once at most; more are closed as they come" },
  { flag: "max-streams-per-connection", field: "maxStreamsPerConnection", kind: "integer", help: "concurrent HTTP/2 streams (calls) per connection at most" },
  { flag: "request-timeout", field: "requestTimeoutMs", kind: "duration", help: "time to receive a request's headers and body; slower senders are cut" },
  { flag: "idle-timeout", field: "idleTimeoutMs", kind: "duration", help: "a connection without a call in flight this long is closed" },
  { flag: "shutdown-timeout", field: "shutdownTimeoutMs", kind: "duration", help: "how long shutdown waits for calls in flight" },
  {
    flag: "startup-hold",
    field: "startupHoldMs",
    kind: "duration",
    help: "how long a call waits while the state loads or no cluster leader is known, before UNAVAILABLE; 0: no wait",
  },
  { flag: "auth-token-file", field: "authTokenFile", kind: "string", help: "file of tokens (one per line) that every call needs; re-read on SIGHUP" },
  {
    flag: "admin-token-file",
    field: "adminTokenFile",
    kind: "string",
    help: "file of tokens that Clear, DeleteKeys and the JSON clear/delete routes need; re-read on SIGHUP",
  },
  { flag: "metrics-auth", field: "metricsAuth", kind: "boolean", help: "GET /metrics needs a token too" },
  { flag: "tls-cert", field: "tlsCert", kind: "string", help: "PEM certificate (chain) of TLS on the port, for every protocol; re-read on SIGHUP" },
  { flag: "tls-key", field: "tlsKey", kind: "string", help: "PEM private key of --tls-cert" },
  { flag: "tls-client-ca", field: "tlsClientCa", kind: "string", help: "PEM CA that client certificates must be signed by (mTLS)" },
  { flag: "log-level", field: "logLevel", kind: "string", help: "fatal, error, warn, info, debug or trace" },
  {
    flag: "etcd-endpoints",
    field: "etcdEndpoints",
    kind: "string",
    help: "etcd client URLs (URL,URL,...): run as a member of a highly available cluster; empty: single-node",
  },
  { flag: "cluster-name", field: "clusterName", kind: "string", help: "the cluster's name; its etcd keys live under /hf3fs-metadata/<name>/" },
  {
    flag: "advertise-url",
    field: "advertiseUrl",
    kind: "string",
    help: "URL at which clients and the other members reach this member (empty: the URL it listens on)",
  },
  {
    flag: "leader-lease",
    field: "leaderLeaseMs",
    kind: "duration",
    help: "TTL of each member's etcd lease (whole seconds): how long a dead leader is waited for",
  },
  { flag: "etcd-ca", field: "etcdCa", kind: "string", help: "PEM CA that etcd's certificate must be signed by (https:// endpoints)" },
  { flag: "etcd-cert", field: "etcdCert", kind: "string", help: "PEM client certificate for etcd (its --client-cert-auth)" },
  { flag: "etcd-key", field: "etcdKey", kind: "string", help: "PEM private key of --etcd-cert" },
  { flag: "etcd-user", field: "etcdUser", kind: "string", help: "etcd user to log in as (etcd's auth)" },
  { flag: "etcd-password-file", field: "etcdPasswordFile", kind: "string", help: "file whose first line is --etcd-user's password" },
];

/**
 * maxBodyBytesFor is the body the largest call within the key limits needs,
 * so that the limits agree: BatchAllocate of maxKeysPerCall keys and as
 * many prefix keys, each of maxKeyBytes, as protobuf (3 bytes of tag and
 * length per key) or as vLLM's JSON (quotes, commas, brackets), plus room
 * for the namespace and the other fields.
 */
export function maxBodyBytesFor({ maxKeysPerCall, maxKeyBytes }: Pick<StateOptions, "maxKeysPerCall" | "maxKeyBytes">): number {
  return 2 * maxKeysPerCall * (maxKeyBytes + 8) + 64 * 1024;
}

/** bufferedBytesFor gives the default bounds of unfinished request bodies: one body at the limit per connection, four in all. */
export function bufferedBytesFor(maxBodyBytes: number): Pick<ServerOptions, "maxBufferedBytes" | "maxBufferedBytesPerConnection"> {
  const body = maxBodyBytes + ENVELOPE_BYTES;
  return { maxBufferedBytes: 4 * body, maxBufferedBytesPerConnection: body };
}

/** MAX_KEY_BYTES is the largest --max-key-bytes: a namespace name is part of LMDB keys of at most 1,978 bytes. */
const MAX_KEY_BYTES = 1_024;

/** defaultServerOptions are the documented defaults. */
export const defaultServerOptions: ServerOptions = {
  ...defaultStateOptions,
  host: "127.0.0.1",
  port: 18000,
  dataDir: "./data",
  inMemory: false,
  ...bufferedBytesFor(maxBodyBytesFor(defaultStateOptions)),
  maxBodyBytes: maxBodyBytesFor(defaultStateOptions),
  http2KeepaliveMs: 10_000,
  overloadLagMs: 0,
  maxConnections: 4_096,
  maxStreamsPerConnection: 100,
  requestTimeoutMs: 60_000,
  idleTimeoutMs: 300_000,
  shutdownTimeoutMs: 10_000,
  startupHoldMs: 60_000,
  authTokenFile: "",
  adminTokenFile: "",
  metricsAuth: false,
  tlsCert: "",
  tlsKey: "",
  tlsClientCa: "",
  logLevel: "info",
  etcdEndpoints: "",
  clusterName: "default",
  advertiseUrl: "",
  leaderLeaseMs: 2_000,
  vllmWorldSize: 0,
  etcdCa: "",
  etcdCert: "",
  etcdKey: "",
  etcdUser: "",
  etcdPasswordFile: "",
};

/** envName is the environment variable of a flag, e.g. HF3FS_METADATA_RESERVATION_TTL. */
export function envName(flag: string): string {
  return `HF3FS_METADATA_${flag.toUpperCase().replaceAll("-", "_")}`;
}

/** parseServerOptions reads flags, then the environment, then the defaults: flags win. Throws with a readable message. */
export function parseServerOptions(args: string[], env: NodeJS.ProcessEnv): ServerOptions {
  const { values } = parseArgs({
    args,
    options: Object.fromEntries(OPTIONS.map((o) => [o.flag, { type: o.kind === "boolean" ? "boolean" : "string" }])),
    strict: true,
    allowPositionals: false,
  });
  const options: Record<string, unknown> = { ...defaultServerOptions };
  const given = new Set<string>();
  for (const { flag, field, kind } of OPTIONS) {
    const raw = values[flag] ?? env[envName(flag)];
    if (raw === undefined) continue;
    options[field] = convert(raw, kind, flag);
    given.add(field);
  }
  const result = options as unknown as ServerOptions;
  if (!given.has("maxBodyBytes")) result.maxBodyBytes = maxBodyBytesFor(result);
  const buffered = bufferedBytesFor(result.maxBodyBytes);
  if (!given.has("maxBufferedBytesPerConnection")) result.maxBufferedBytesPerConnection = buffered.maxBufferedBytesPerConnection;
  if (!given.has("maxBufferedBytes")) result.maxBufferedBytes = Math.max(buffered.maxBufferedBytes, result.maxBufferedBytesPerConnection);
  if (result.maxBufferedBytesPerConnection < result.maxBodyBytes + ENVELOPE_BYTES || result.maxBufferedBytes < result.maxBufferedBytesPerConnection) {
    throw new Error(
      `--max-buffered-bytes (${result.maxBufferedBytes}) must be at least --max-buffered-bytes-per-connection (${result.maxBufferedBytesPerConnection}), which must hold one body at --max-body-bytes (${result.maxBodyBytes} + ${ENVELOPE_BYTES})`,
    );
  }
  if (result.metricsAuth && result.authTokenFile === "" && result.adminTokenFile === "") {
    throw new Error("--metrics-auth needs --auth-token-file or --admin-token-file");
  }
  for (const field of ["http2KeepaliveMs", "requestTimeoutMs", "idleTimeoutMs"] as const) {
    if (result[field] <= 0) throw new Error(`--${OPTIONS.find((o) => o.field === field)!.flag} must be longer than 0`);
  }
  if ((result.tlsCert === "") !== (result.tlsKey === "")) throw new Error("--tls-cert and --tls-key go together");
  if (result.tlsClientCa !== "" && result.tlsCert === "") throw new Error("--tls-client-ca needs --tls-cert and --tls-key");
  if (result.port > 65_535) throw new Error(`--port must be at most 65535, got ${result.port}`);
  for (const flag of ["max-keys-per-call", "max-key-bytes", "max-ranks-per-namespace", "max-namespaces", "max-connections", "max-streams-per-connection"]) {
    const field = OPTIONS.find((o) => o.flag === flag)!.field;
    if ((result[field] as number) < 1) throw new Error(`--${flag} must be at least 1`);
  }
  checkCluster(result);
  checkEviction(result);
  if (result.vllmWorldSize > result.maxRanksPerNamespace) {
    throw new Error(`--vllm-world-size must be at most --max-ranks-per-namespace (${result.maxRanksPerNamespace}), got ${result.vllmWorldSize}`);
  }
  checkMaxRanks(result.maxRanksPerNamespace, "--max-ranks-per-namespace");
  if (result.maxKeyBytes > MAX_KEY_BYTES)
    throw new Error(`--max-key-bytes must be at most ${MAX_KEY_BYTES} (namespace names are keys of the store), got ${result.maxKeyBytes}`);
  return result;
}

/** checkEviction checks the eviction policy and its watermarks. */
function checkEviction(options: ServerOptions): void {
  if (!(EVICTION_POLICIES as readonly string[]).includes(options.eviction)) {
    throw new Error(`--eviction takes ${EVICTION_POLICIES.join(" or ")}, got "${options.eviction}"`);
  }
  checkWatermarks(options.evictHighWatermark, options.evictLowWatermark, { high: "--evict-high-watermark", low: "--evict-low-watermark" });
}

/** checkCluster checks the options of high availability. */
function checkCluster(options: ServerOptions): void {
  if (options.etcdEndpoints === "") {
    const stray = ETCD_LINK_FLAGS.find(({ field }) => options[field] !== "");
    if (stray !== undefined) throw new Error(`--${stray.flag} is for a member of a cluster: give --etcd-endpoints too`);
    return;
  }
  for (const endpoint of options.etcdEndpoints.split(",")) {
    if (!/^https?:\/\/[^/\s]+\/?$/.test(endpoint)) throw new Error(`--etcd-endpoints takes URLs like http://127.0.0.1:2379, got "${endpoint}"`);
  }
  if (options.authTokenFile !== "" && options.adminTokenFile === "") {
    throw new Error("a cluster member with --auth-token-file needs --admin-token-file too: standbys fetch the leader's snapshot with an admin token");
  }
  if (options.inMemory) throw new Error("--etcd-endpoints needs the durable store (a member keeps the cluster's state in --data-dir): drop --in-memory");
  if (!/^[A-Za-z0-9._-]{1,64}$/.test(options.clusterName))
    throw new Error(`--cluster-name takes 1 to 64 letters, digits, ".", "_" or "-", got "${options.clusterName}"`);
  if (options.advertiseUrl !== "" && !/^https?:\/\/[^/\s]+\/?$/.test(options.advertiseUrl)) {
    throw new Error(`--advertise-url takes a URL like http://10.0.0.2:18000, got "${options.advertiseUrl}"`);
  }
  if (options.leaderLeaseMs < 1_000 || options.leaderLeaseMs % 1_000 !== 0) {
    throw new Error(`--leader-lease must be whole seconds, at least 1s (etcd leases count seconds), got ${options.leaderLeaseMs} ms`);
  }
  checkEtcdSecurity(options);
}

/** ETCD_LINK_FLAGS are the options of the member's link to etcd (TLS and auth): the etcd-* options but the endpoints. */
const ETCD_LINK_FLAGS = OPTIONS.filter(({ flag }) => flag.startsWith("etcd-") && flag !== "etcd-endpoints");

/** checkEtcdSecurity checks the options of the member's link to etcd: TLS needs https:// endpoints, and each pair comes whole. */
function checkEtcdSecurity(options: ServerOptions): void {
  const tls = options.etcdCa !== "" || options.etcdCert !== "" || options.etcdKey !== "";
  if (tls && !options.etcdEndpoints.split(",").every((endpoint) => endpoint.startsWith("https://"))) {
    throw new Error("--etcd-ca, --etcd-cert and --etcd-key are for TLS to etcd: give https:// --etcd-endpoints");
  }
  if ((options.etcdCert === "") !== (options.etcdKey === "")) throw new Error("--etcd-cert and --etcd-key go together: give both or neither");
  if (options.etcdCert !== "" && options.etcdCa === "") throw new Error("--etcd-cert needs --etcd-ca, the CA that signed etcd's certificate");
  if ((options.etcdUser === "") !== (options.etcdPasswordFile === "")) {
    throw new Error("--etcd-user and --etcd-password-file go together: give both or neither");
  }
}

function convert(raw: string | boolean, kind: Kind, flag: string): unknown {
  if (kind === "boolean") return raw === true || raw === "true" || raw === "1";
  const text = String(raw);
  if (kind === "string") return text;
  if (kind === "duration") {
    try {
      return parseDuration(text);
    } catch (e) {
      throw new Error(`--${flag}: ${(e as Error).message}`);
    }
  }
  if (kind === "fraction") {
    if (!/^(0(\.\d+)?|1(\.0*)?|\.\d+)$/.test(text)) throw new Error(`--${flag} must be a fraction from 0 to 1, like 0.95, got "${text}"`);
    return Number(text);
  }
  if (!/^\d+$/.test(text)) throw new Error(`--${flag} must be a whole number, got "${text}"`);
  return Number(text);
}

/** usage is the help text of `serve`. */
export function usage(): string {
  const lines = OPTIONS.map((o) => {
    const value = o.kind === "boolean" ? "" : ` <${o.kind}>`;
    const fallback = defaultServerOptions[o.field];
    return `  --${o.flag}${value}\n      ${o.help} (default ${String(fallback)}; env ${envName(o.flag)})`;
  });
  return `usage: hf3fs-metadata serve [options]\n\noptions:\n${lines.join("\n")}\n\nDurations accept 500ms, 60s, 10m, 1h; defaults in ms.`;
}
