import { type CallOptions, type Client, Code, ConnectError, type Interceptor, type Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { MetadataService } from "../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { defaultRetryPolicy, type RetryPolicy } from "./backoff.js";
import { LeaderFollowing, type Method } from "./leader-following.js";
import { MetadataError } from "./metadata-error.js";
import { type InitRequest, ShardLink } from "./shard-link.js";
import { ShardRouting } from "./shard-routing.js";

/** MetadataClientOptions configure createMetadataClient. */
export interface MetadataClientOptions {
  /**
   * baseUrl is the server, e.g. http://127.0.0.1:18000; for a highly
   * available cluster, its members, comma-separated
   * (http://10.0.0.1:18000,http://10.0.0.2:18000,...).
   */
  baseUrl: string;
  /** protocol is the wire protocol. Defaults to "grpc". */
  protocol?: "grpc" | "connect" | "grpc-web";
  /** httpVersion for connect and grpc-web. Defaults to "2" (gRPC always uses 2). */
  httpVersion?: "1.1" | "2";
  /** retry bounds the retries; see RetryPolicy for the defaults. */
  retry?: Partial<RetryPolicy>;
  /** random draws the jitter, in [0, 1). Defaults to Math.random. */
  random?: () => number;
  /** token is sent on every call as `authorization: Bearer <token>` (servers started with --auth-token-file). */
  token?: string;
  /** tls trusts `ca` for an https baseUrl (else the system's CAs) and presents a client certificate (mTLS); PEM. */
  tls?: ClientTls;
  /** transport replaces the one built from baseUrl, protocol, token and tls (tests, custom stacks); with it, baseUrl names one server. */
  transport?: Transport;
  /**
   * route: learn the cluster's shards from its members (ClusterService)
   * and send each shard's leader its part of a call, instead of one member
   * that routes it (one hop less). A cluster of one shard, or servers that
   * do not tell, are called as without it; so is a `transport` given. Defaults to false.
   */
  route?: boolean;
}

/** ClientTls are the PEM certificates of a client over TLS: the CA it trusts, and its own certificate and key (mTLS). */
export interface ClientTls {
  ca?: string | Buffer;
  cert?: string | Buffer;
  key?: string | Buffer;
}

/** MetadataClient is the generated client of MetadataService, with retries and re-initialization. */
export type MetadataClient = Client<typeof MetadataService> & {
  /** serverId is the last server id seen, undefined before the first answer. */
  readonly serverId: string | undefined;
};

/**
 * createMetadataClient returns a MetadataService client that
 * - retries UNAVAILABLE answers and broken connections with capped
 *   exponential backoff and full jitter until the retry deadline (every RPC
 *   is safe to retry), then fails with one UNAVAILABLE error naming the server;
 * - with several servers (a cluster's members), goes to the leader that a
 *   standby names (NOT_LEADER) at once, and to the next server after a
 *   failure, within the same retry deadline;
 * - remembers its InitializeRank calls, and when the server answers
 *   RANK_NOT_INITIALIZED or its hf3fs-server-id changes (it restarted and
 *   lost its state), runs them again; a RANK_NOT_INITIALIZED call is then
 *   retried once;
 * - with `route`, learns the cluster's shards (ClusterService) and sends
 *   each shard's leader its part of a call itself (shard-routing.ts), each
 *   shard followed, retried and initialized again as above;
 * - sends the calls of the cycle to a server (or shard) made in one turn
 *   of the event loop, or while two are on their way there, together as
 *   one Batch, each its own answer (gathering.ts), but calls with options
 *   besides a signal;
 * - throws MetadataError, a ConnectError with the server's ErrorInfo decoded.
 */
export function createMetadataClient(options: MetadataClientOptions): MetadataClient {
  const initialized = new Map<string, InitRequest>();
  let serverId: string | undefined;
  const link = (baseUrl: string, header?: Record<string, string>) =>
    new ShardLink(
      new LeaderFollowing({
        baseUrl,
        transportFor: (url) => options.transport ?? transportFor({ ...options, baseUrl: url }, header),
        single: options.transport !== undefined,
        policy: { ...defaultRetryPolicy, ...options.retry },
        random: options.random ?? Math.random,
      }),
      initialized,
      (id) => (serverId = id),
    );
  const whole = link(options.baseUrl);
  // A fixed transport (a test's, a custom stack) reaches one server: nothing to route among.
  const routing =
    options.route && options.transport === undefined
      ? new ShardRouting(options.baseUrl.split(","), (url) => transportFor({ ...options, baseUrl: url }), link)
      : undefined;

  async function call(method: Method, request: unknown, callOptions: CallOptions | undefined): Promise<unknown> {
    try {
      const shards = await routing?.shards();
      if (shards === undefined) return await whole.call(method, request, callOptions);
      return (await shards(method, request, callOptions)).response;
    } catch (e) {
      throw MetadataError.of(e);
    }
  }

  const client = Object.fromEntries(
    MetadataService.methods.map((m) => [m.localName, (req: unknown, o?: CallOptions) => call(m.localName as Method, req, o)]),
  ) as Client<typeof MetadataService>;
  return Object.defineProperty(client, "serverId", { get: () => serverId, enumerable: true }) as MetadataClient;
}

/**
 * CLIENT_PING_MS is how long a connection with calls on it may be silent
 * before it is PINGed, and how long the answer may take: a stalled server's
 * calls go on within twice as long, as the Python example's keepalive
 * (examples/python) does; a live server answers within milliseconds, and
 * holds its event loop far less (docs/performance.md).
 */
const CLIENT_PING_MS = 2_000;

/** transportFor builds the transport of the options' protocol and HTTP version, sending the token if any, and `header`. */
export function transportFor(options: MetadataClientOptions, header: Readonly<Record<string, string>> = {}): Transport {
  const httpVersion = options.httpVersion ?? "2";
  const sent = options.token === undefined ? header : { ...header, authorization: `Bearer ${options.token}` };
  const interceptors = Object.keys(sent).length === 0 ? [refusedAsUnavailable] : [refusedAsUnavailable, withHeader(sent)];
  const nodeOptions = options.tls === undefined ? undefined : { ...options.tls };
  // A connection with calls on it that receives nothing for CLIENT_PING_MS is PINGed, and closed unless the answer comes within
  // as long: its calls then go on to the next server. Without it (connect-node's default), a server paused or cut off held them.
  const pings = { pingIntervalMs: CLIENT_PING_MS, pingTimeoutMs: CLIENT_PING_MS };
  switch (options.protocol ?? "grpc") {
    case "grpc":
      return createGrpcTransport({ baseUrl: options.baseUrl, interceptors, nodeOptions, ...pings });
    case "connect":
      return createConnectTransport({ baseUrl: options.baseUrl, httpVersion, interceptors, nodeOptions, ...pings });
    case "grpc-web":
      return createGrpcWebTransport({ baseUrl: options.baseUrl, httpVersion, interceptors, nodeOptions, ...pings });
  }
}

/** withHeader sets `header` (an `authorization: Bearer <token>`, a shard's mark) on every request. */
export function withHeader(header: Readonly<Record<string, string>>): Interceptor {
  return (next) => (req) => {
    for (const [name, value] of Object.entries(header)) req.header.set(name, value);
    return next(req);
  };
}

/**
 * refusedAsUnavailable gives a call whose HTTP/2 stream the server refused
 * (REFUSED_STREAM: it crossed the GOAWAY of a connection closed as idle or
 * drained, and was not served, RFC 9113 8.7) the code UNAVAILABLE, which
 * the client sends again. connect-node maps that reset to UNAVAILABLE, but
 * Node's stream error comes first, and it reports that one as INTERNAL.
 */
const refusedAsUnavailable: Interceptor = (next) => async (req) => {
  try {
    return await next(req);
  } catch (error) {
    if (!refusedStream(error)) throw error;
    throw new ConnectError("the server refused the call's stream (REFUSED_STREAM): it was not served", Code.Unavailable, undefined, undefined, error);
  }
};

/** refusedStream is true for an error that is, or was caused by, Node's error for a stream closed with REFUSED_STREAM. */
function refusedStream(error: unknown): boolean {
  for (let cause: unknown = error; cause instanceof Error; cause = cause.cause) {
    if ((cause as NodeJS.ErrnoException).code === "ERR_HTTP2_STREAM_ERROR" && cause.message.endsWith("NGHTTP2_REFUSED_STREAM")) return true;
  }
  return false;
}
