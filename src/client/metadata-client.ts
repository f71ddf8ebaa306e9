import type { MessageInitShape } from "@bufbuild/protobuf";
import { type CallOptions, type Client, Code, ConnectError, type Interceptor, type Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { ErrorInfoSchema, type InitializeRankRequestSchema, MetadataService, Reason, Role } from "../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { SERVER_ID_HEADER } from "../protocol/headers.js";
import { defaultRetryPolicy, type RetryPolicy } from "./backoff.js";
import { LeaderFollowing, type Method } from "./leader-following.js";
import { MetadataError } from "./metadata-error.js";

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

type InitRequest = MessageInitShape<typeof InitializeRankRequestSchema>;

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
 * - throws MetadataError, a ConnectError with the server's ErrorInfo decoded.
 */
export function createMetadataClient(options: MetadataClientOptions): MetadataClient {
  const following = new LeaderFollowing({
    baseUrl: options.baseUrl,
    transportFor: (url) => options.transport ?? transportFor({ ...options, baseUrl: url }),
    single: options.transport !== undefined,
    policy: { ...defaultRetryPolicy, ...options.retry },
    random: options.random ?? Math.random,
  });
  const initialized = new Map<string, InitRequest>();
  let serverId: string | undefined;

  /** attempt makes one call with retries on UNAVAILABLE; it notes the server id of every answer. */
  async function attempt<R>(method: Method, request: unknown, callOptions: CallOptions | undefined): Promise<{ response: R; restarted: boolean }> {
    try {
      const { response, serverId: id } = await following.call<R>(method, request, callOptions);
      return { response, restarted: noteServerId(id) };
    } catch (e) {
      // An error's metadata merges headers and trailers: "id, id" over gRPC.
      if (e instanceof ConnectError) noteServerId(e.metadata.get(SERVER_ID_HEADER)?.split(",")[0]?.trim() ?? null);
      throw e;
    }
  }

  /** noteServerId records the server id of an answer; true when it changed (a restart that lost state). */
  function noteServerId(id: string | null): boolean {
    if (id === null || id === serverId) return false;
    const changed = serverId !== undefined;
    serverId = id;
    return changed;
  }

  async function reinitialize(): Promise<void> {
    for (const request of initialized.values()) await attempt("initializeRank", request, undefined);
  }

  async function call(method: Method, request: unknown, callOptions: CallOptions | undefined): Promise<unknown> {
    try {
      return await callOnce(method, request, callOptions);
    } catch (e) {
      throw MetadataError.of(e);
    }
  }

  async function callOnce(method: Method, request: unknown, callOptions: CallOptions | undefined): Promise<unknown> {
    try {
      const { response, restarted } = await attempt(method, request, callOptions);
      if (method === "initializeRank") remember(request as InitRequest);
      else if (restarted) await reinitialize();
      return response;
    } catch (e) {
      if (method === "initializeRank" || initialized.size === 0 || !isRankNotInitialized(e)) throw e;
      await reinitialize();
      return (await attempt(method, request, callOptions)).response;
    }
  }

  function remember(request: InitRequest): void {
    if (request.role === Role.SCHEDULER) return;
    initialized.set(`${request.namespace ?? ""}\u0000${request.rank ?? 0}`, request);
  }

  const client = Object.fromEntries(
    MetadataService.methods.map((m) => [m.localName, (req: unknown, o?: CallOptions) => call(m.localName as Method, req, o)]),
  ) as Client<typeof MetadataService>;
  return Object.defineProperty(client, "serverId", { get: () => serverId, enumerable: true }) as MetadataClient;
}

function isRankNotInitialized(e: unknown): boolean {
  if (!(e instanceof ConnectError) || e.code !== Code.FailedPrecondition) return false;
  return e.findDetails(ErrorInfoSchema).some((d) => d.reason === Reason.RANK_NOT_INITIALIZED);
}

/** transportFor builds the transport of the options' protocol and HTTP version, sending the token if any. */
export function transportFor(options: MetadataClientOptions): Transport {
  const httpVersion = options.httpVersion ?? "2";
  const interceptors = options.token === undefined ? [] : [bearer(options.token)];
  const nodeOptions = options.tls === undefined ? undefined : { ...options.tls };
  switch (options.protocol ?? "grpc") {
    case "grpc":
      return createGrpcTransport({ baseUrl: options.baseUrl, interceptors, nodeOptions });
    case "connect":
      return createConnectTransport({ baseUrl: options.baseUrl, httpVersion, interceptors, nodeOptions });
    case "grpc-web":
      return createGrpcWebTransport({ baseUrl: options.baseUrl, httpVersion, interceptors, nodeOptions });
  }
}

/** bearer sets `authorization: Bearer <token>` on every request. */
function bearer(token: string): Interceptor {
  return (next) => (req) => {
    req.header.set("authorization", `Bearer ${token}`);
    return next(req);
  };
}
