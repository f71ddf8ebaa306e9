import { type CallOptions, type Client, Code, ConnectError, createClient, type Transport } from "@connectrpc/connect";
import { ErrorInfoSchema, MetadataService, Reason } from "../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { SERVER_ID_HEADER } from "../protocol/headers.js";
import { backoffMs, type RetryPolicy } from "./backoff.js";

/** Method is a MetadataService method by its local name. */
export type Method = keyof Client<typeof MetadataService>;

/** FollowingOptions configure LeaderFollowing. */
export interface FollowingOptions {
  /** baseUrl is the server, or a cluster's members, comma-separated. */
  readonly baseUrl: string;
  /** transportFor builds the transport to one server. */
  readonly transportFor: (url: string) => Transport;
  /** single: the transport is fixed (a test's), so a leader named by a standby is never followed. */
  readonly single?: boolean;
  /**
   * listedOnly: a leader a standby names is followed only when it is one of
   * baseUrl's servers (same scheme, host and port), so that a server cannot
   * send the calls, and the token they carry, elsewhere (a relay); otherwise
   * any leader named is followed (a client given one member).
   */
  readonly listedOnly?: boolean;
  readonly policy: RetryPolicy;
  readonly random: () => number;
  /** onRetry hears every retry, with the error that caused it (a relay's metrics). */
  readonly onRetry?: (error: ConnectError) => void;
  /** onServer hears each change of the server calls go to (a relay's metrics and health). */
  readonly onServer?: (url: string) => void;
  /**
   * left hears the server calls left when told of a leader elsewhere
   * (prefer): the calls already there stay, unless its connection shows it
   * stalled (LeanTransports.left).
   */
  readonly left?: (url: string) => void;
}

/** Attempted is a call's response, the server id its answer carried (null: none), and how many times it was sent. */
export interface Attempted<R> {
  readonly response: R;
  readonly serverId: string | null;
  readonly attempts: number;
}

/**
 * LeaderFollowing makes MetadataService calls to a server, or to the
 * leader of a cluster: it retries UNAVAILABLE answers and broken
 * connections with capped exponential backoff and full jitter until the
 * call's retry deadline (every RPC is safe to retry: docs/contract.md, Errors),
 * goes at once to the leader a standby names (NOT_LEADER), and to the next
 * member after a failure. The client (metadata-client.ts) and the relay
 * (src/relay/) both call through it.
 */
export class LeaderFollowing {
  private readonly servers: ServerList;

  constructor(private readonly options: FollowingOptions) {
    this.servers = new ServerList(options);
  }

  /** current is the URL calls go to now. */
  get current(): string {
    return this.servers.url;
  }

  /** deadlineMs is how long a call is retried unless it says otherwise (the policy's). */
  get deadlineMs(): number {
    return this.options.policy.deadlineMs;
  }

  /** setServers replaces the servers (a relay that finds a cluster's members by DNS); calls stay where they go if that server is still listed. */
  setServers(urls: readonly string[]): void {
    this.servers.replace(urls);
  }

  /** prefer sends calls to `url` from now on (a relay's health watch found the leader there). */
  prefer(url: string): void {
    const before = this.servers.url;
    if (this.options.single || !this.servers.follow(url)) return;
    this.options.onServer?.(this.servers.url);
    this.options.left?.(before);
  }

  /**
   * call makes one call, retried as the class says within deadlineMs
   * (the policy's by default), and fails with one UNAVAILABLE error naming
   * the server once that is spent. Every error carries the server id its
   * answer carried, if any, in its metadata.
   */
  async call<R>(method: Method, request: unknown, callOptions: CallOptions | undefined, deadlineMs = this.options.policy.deadlineMs): Promise<Attempted<R>> {
    const { policy, random } = this.options;
    const started = Date.now();
    let attempts = 0;
    for (let n = 0; ; n++) {
      let serverId: string | null = null;
      attempts++;
      const sentTo = this.servers.url;
      try {
        const response = await (this.servers.client()[method] as (r: unknown, o: CallOptions) => Promise<R>)(request, {
          ...callOptions,
          onHeader(headers) {
            serverId = headers.get(SERVER_ID_HEADER);
            callOptions?.onHeader?.(headers);
          },
        });
        return { response, serverId, attempts };
      } catch (e) {
        const error = ConnectError.from(e);
        if (!lostConnection(error, callOptions?.signal)) throw error;
        // A standby that names the leader: go there now. Anything else unavailable: the next server, after a backoff.
        if (Date.now() - started < deadlineMs && !this.options.single && this.servers.follow(leaderUrlOf(error))) {
          this.heard(error);
          this.options.onServer?.(this.servers.url);
          continue;
        }
        const waitMs = backoffMs(policy, n, random);
        if (Date.now() - started + waitMs > deadlineMs || callOptions?.signal?.aborted) throw this.unavailable(error, attempts, Date.now() - started);
        this.heard(error);
        await pause(waitMs, callOptions?.signal);
        const before = this.servers.url;
        this.servers.failed(sentTo);
        if (this.servers.url !== before) this.options.onServer?.(this.servers.url);
      }
    }
  }

  /** heard reports a retry. */
  private heard(error: ConnectError): void {
    this.options.onRetry?.(error);
  }

  /** unavailable is the error of a call whose retries are spent: UNAVAILABLE, with the last answer's details and metadata. */
  private unavailable(cause: ConnectError, attempts: number, elapsedMs: number): ConnectError {
    const error = new ConnectError(
      `metadata server ${this.options.baseUrl} unavailable after ${attempts} attempts in ${Math.round(elapsedMs)} ms: ${cause.rawMessage}`,
      Code.Unavailable,
      cause.metadata,
      undefined,
      cause,
    );
    error.details.push(...cause.details);
    return error;
  }
}

/** pause waits `ms`, or until signal aborts. */
function pause(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    signal?.addEventListener("abort", done, { once: true });
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    }
  });
}

/**
 * ServerList holds a client per server of baseUrl (made on first use) and
 * which one calls go to: the first, until a standby names the leader
 * (follow) or a call fails there (failed).
 */
class ServerList {
  private urls: string[];
  private readonly clients = new Map<string, Client<typeof MetadataService>>();
  private at = 0;
  private leader: string | undefined;

  constructor(private readonly options: FollowingOptions) {
    this.urls = options.baseUrl.split(",").map(trimUrl);
  }

  /** size is the number of servers given. */
  get size(): number {
    return this.urls.length;
  }

  /** url is the server calls go to now. */
  get url(): string {
    return this.leader ?? this.urls[this.at]!;
  }

  /** client is the client of the server calls go to now. */
  client(): Client<typeof MetadataService> {
    const url = this.url;
    let client = this.clients.get(url);
    if (client === undefined) {
      client = createClient(MetadataService, this.options.transportFor(url));
      this.clients.set(url, client);
    }
    return client;
  }

  /** follow sends calls to the leader a standby named; false when it named none, the one calls go to already, or one not listed (listedOnly). */
  follow(leaderUrl: string): boolean {
    const url = trimUrl(leaderUrl);
    if (url === "" || url === this.url) return false;
    if (this.options.listedOnly && !this.urls.some((listed) => sameOrigin(listed, url))) return false;
    this.leader = url;
    return true;
  }

  /** replace lists other servers; calls go on to the server they go to if it is still listed, else to the first. */
  replace(urls: readonly string[]): void {
    if (urls.length === 0) return;
    const now = this.url;
    this.urls = urls.map(trimUrl);
    if (this.leader !== undefined && !this.urls.includes(this.leader)) this.leader = undefined;
    this.at = Math.max(0, this.urls.indexOf(now));
  }

  /**
   * failed sends calls on from `url`, where one just failed: to the next
   * server of the list, unless they go elsewhere already (a health watch or
   * a standby named the leader meanwhile: a server paused through a
   * failover fails its calls long after).
   */
  failed(url: string): void {
    if (url !== this.url) return;
    if (this.leader === undefined) this.at = (this.at + 1) % this.urls.length;
    this.leader = undefined;
  }
}

/** sameOrigin is true when two URLs have the same scheme, host and port; false when either does not parse. */
function sameOrigin(a: string, b: string): boolean {
  return URL.canParse(a) && URL.canParse(b) && new URL(a).origin === new URL(b).origin;
}

/** trimUrl is a URL without spaces around it or a trailing slash. */
function trimUrl(url: string): string {
  return url.trim().replace(/\/$/, "");
}

/**
 * lostConnection is true for an error that says the server is unavailable
 * (a refused stream too: refusedAsUnavailable), or that the connection
 * broke under the call (a server killed mid-call: ECONNRESET is ABORTED, a
 * torn-down HTTP/2 session CANCELED) unless the caller itself canceled it.
 * Every RPC of the service is safe to retry.
 */
function lostConnection(error: ConnectError, signal: AbortSignal | undefined): boolean {
  if (error.code === Code.Unavailable) return true;
  return (error.code === Code.Aborted || error.code === Code.Canceled) && signal?.aborted !== true;
}

/** leaderUrlOf is the leader a NOT_LEADER error names, "" for other errors. */
function leaderUrlOf(error: ConnectError): string {
  const info = error.findDetails(ErrorInfoSchema)[0];
  return info?.reason === Reason.NOT_LEADER ? info.leaderUrl : "";
}
