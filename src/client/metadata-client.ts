import type { MessageInitShape } from "@bufbuild/protobuf";
import { type CallOptions, type Client, Code, ConnectError, createClient, type Interceptor, type Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { ErrorInfoSchema, type InitializeRankRequestSchema, MetadataService, Reason, Role } from "../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { SERVER_ID_HEADER } from "../protocol/headers.js";
import { backoffMs, defaultRetryPolicy, type RetryPolicy } from "./backoff.js";

/** MetadataClientOptions configure createMetadataClient. */
export interface MetadataClientOptions {
  /** baseUrl is the server, e.g. http://127.0.0.1:18000. */
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
  /** transport replaces the one built from baseUrl, protocol, token and tls (tests, custom stacks). */
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
type Method = keyof Client<typeof MetadataService>;

/**
 * createMetadataClient returns a MetadataService client that
 * - retries UNAVAILABLE answers and connection failures with capped
 *   exponential backoff and full jitter until the retry deadline (every RPC
 *   is safe to retry), then fails with one UNAVAILABLE error naming the server;
 * - remembers its InitializeRank calls, and when the server answers
 *   RANK_NOT_INITIALIZED or its hf3fs-server-id changes (it restarted and
 *   lost its state), runs them again; a RANK_NOT_INITIALIZED call is then
 *   retried once.
 */
export function createMetadataClient(options: MetadataClientOptions): MetadataClient {
  const policy = { ...defaultRetryPolicy, ...options.retry };
  const random = options.random ?? Math.random;
  const inner = createClient(MetadataService, options.transport ?? transportFor(options));
  const initialized = new Map<string, InitRequest>();
  let serverId: string | undefined;

  /** attempt makes one call with retries on UNAVAILABLE; it notes the server id of every answer. */
  async function attempt<R>(method: Method, request: unknown, callOptions: CallOptions | undefined): Promise<{ response: R; restarted: boolean }> {
    const started = Date.now();
    for (let n = 0; ; n++) {
      let headerId: string | null = null;
      try {
        const response = await (inner[method] as (r: unknown, o: CallOptions) => Promise<R>)(request, {
          ...callOptions,
          onHeader(headers) {
            headerId = headers.get(SERVER_ID_HEADER);
            callOptions?.onHeader?.(headers);
          },
        });
        return { response, restarted: noteServerId(headerId) };
      } catch (e) {
        const error = ConnectError.from(e);
        // An error's metadata merges headers and trailers: "id, id" over gRPC.
        noteServerId(error.metadata.get(SERVER_ID_HEADER)?.split(",")[0]?.trim() ?? null);
        if (error.code !== Code.Unavailable) throw error;
        const waitMs = backoffMs(policy, n, random);
        if (Date.now() - started + waitMs > policy.deadlineMs) throw unavailable(error, n + 1, Date.now() - started);
        await new Promise((resolve) => setTimeout(resolve, waitMs));
      }
    }
  }

  function unavailable(cause: ConnectError, attempts: number, elapsedMs: number): ConnectError {
    const error = new ConnectError(
      `metadata server ${options.baseUrl} unavailable after ${attempts} attempts in ${Math.round(elapsedMs)} ms: ${cause.rawMessage}`,
      Code.Unavailable,
      cause.metadata,
      undefined,
      cause,
    );
    error.details.push(...cause.details);
    return error;
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
