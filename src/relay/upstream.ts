import { type CallOptions, Code, ConnectError } from "@connectrpc/connect";
import { ErrorInfoSchema, Reason } from "../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { type BatchLimits, Gathering, type Sent } from "../client/gathering.js";
import { LeaderFollowing, type Method } from "../client/leader-following.js";
import { callHeader, LeanTransports } from "../client/lean-transports.js";
import type { ClientTls } from "../client/metadata-client.js";
import { MetadataError } from "../core/index.js";
import { SERVER_ID_HEADER, SHARD_LOCAL_HEADER, UNREACHED_HEADER } from "../protocol/headers.js";
import type { Logger } from "../server/logger.js";
import { LOOKUPS, type Lookup, missesOf, PendingLookups } from "../service/lookup-misses.js";
import type { MetadataCalls, RequestOf } from "../service/metadata-calls.js";
import { Notifier } from "../service/notifier.js";
import { ServerWatch } from "./health-watch.js";
import { ReadSpreading } from "./read-spreading.js";
import type { RelayMetrics } from "./relay-metrics.js";

/** RETRY = the backoff between sends of a held call: short, as a failover upstream takes about 2 s and the members are few. */
const RETRY = { initialBackoffMs: 25, maxBackoffMs: 250 };

/** UpstreamConfig is where a relay sends its calls and how. */
export interface UpstreamConfig {
  /** urls is the server, or a cluster's members, comma-separated. */
  readonly urls: string;
  /** holdMs bounds how long one call is held through failures upstream (--hold), within its own deadline. */
  readonly holdMs: number;
  /** readHoldMs is how long no server may have answered calls before a lookup (LOOKUPS) is answered as misses (--read-hold; 0: never, it is held as any call). */
  readonly readHoldMs: number;
  /** token is sent upstream on every call as `authorization: Bearer`; undefined: none. */
  readonly token?: string;
  /** tls is what the relay trusts and presents upstream (https). */
  readonly tls?: ClientTls;
  readonly metrics: RelayMetrics;
  /** logger hears where calls go and whether a server answers them (rare: failovers and failures upstream). */
  readonly logger: Logger;
  /** shardLocal: the servers are one shard of a cluster split into shards, sent each its own part (SHARD_LOCAL_HEADER: not routed again). */
  readonly shardLocal?: boolean;
  /** spreadReads sends reads to the caught-up standbys in turn rather than to the leader (ReadSpreading). */
  readonly spreadReads?: boolean;
  /** limits are what the servers take of one call (--max-keys-per-call, --max-body-bytes): a Batch of gathered calls stays within them (Gathering). */
  readonly limits: BatchLimits;
  /** pingMs is how often the calls' connections are PINGed (5 s by default; tests set it longer to see what else moves a held call). */
  readonly pingMs?: number;
  /** heldPingMs is how long a call may wait before its connection is PINGed (250 ms by default; tests set it longer). */
  readonly heldPingMs?: number;
}

/**
 * Upstream is the relay's way to the servers: MetadataService calls over
 * gRPC on one multiplexed HTTP/2 connection per server (the lean
 * transport), following the
 * leader (LeaderFollowing: NOT_LEADER names it, the next member after a
 * failure) and held through failovers up to the hold; a health watch on
 * every server finds the one that answers calls as soon as it does, so
 * that calls go straight to a cluster's leader and health says whether one
 * is reachable (reach).
 */
export class Upstream {
  /** reach is what the relay's health reports: SERVING while a server answers calls. */
  readonly reach: Reach;
  private readonly transports: LeanTransports;
  private readonly following: LeaderFollowing;
  /** gathering sends the calls that come in one turn of the event loop, or while two are on their way, together as Batches. */
  private readonly gathering: Gathering;
  /** reads spreads a cluster's reads over its caught-up standbys (--reads members). */
  private readonly reads: ReadSpreading | undefined;
  private urls: string[];
  /** watches follow each server's health: whether it leads (MetadataService) and, for spread reads, whether it is caught up (""). */
  private readonly watches = new Map<string, ServerWatch>();

  private readonly logger: Logger;
  /** lookups are the lookups on their way upstream, each given up by its function (readOrMiss). */
  private readonly lookups = new PendingLookups();
  /** giveUpTimer gives up the lookups once no server has answered calls for --read-hold (armGiveUp). */
  private giveUpTimer: NodeJS.Timeout | undefined;

  constructor(private readonly config: UpstreamConfig) {
    const logger = config.logger.child({ upstream: config.urls });
    this.logger = logger;
    this.reach = new Reach(logger);
    // A shard of a cluster split into shards is sent its own part of each call: it answers it alone, without routing it again.
    this.transports = new LeanTransports({
      tls: config.tls,
      header: callHeader(config.token, config.shardLocal ? { [SHARD_LOCAL_HEADER]: "1" } : {}),
      pingMs: config.pingMs,
      heldPingMs: config.heldPingMs,
    });
    this.urls = config.urls.split(",").map((url) => url.trim().replace(/\/$/, ""));
    this.following = new LeaderFollowing({
      baseUrl: this.urls.join(","),
      listedOnly: true,
      transportFor: (url) => this.transports.of(url),
      policy: { deadlineMs: config.holdMs, ...RETRY },
      random: Math.random,
      onRetry: () => config.metrics.retried(),
      onServer: (url) => {
        config.metrics.moved();
        logger.info({ url }, "upstream: calls go to another server");
      },
      // A leader paused through its failover holds the calls sent to it: they go again once its connection proves silent,
      // at once if its watch found it so already.
      left: (url) => {
        const silent = this.silentAt(url);
        if (silent) logger.warn({ url }, "upstream: the server calls left is silent; the calls held there go again");
        this.transports.left(url, silent);
      },
    });
    this.gathering = new Gathering(
      (method, request, options, holdMs) => this.following.call(method, request, options, holdMs),
      config.limits,
      config.holdMs,
      (calls) => config.metrics.gathered(calls),
    );
    this.reads = config.spreadReads
      ? new ReadSpreading(
          (url) => this.transports.of(url),
          () => this.following.current,
        )
      : undefined;
    this.watch();
  }

  /** calls are the upstream as the relay's JSON routes call it. */
  readonly calls: MetadataCalls = async (method, request, signal) => {
    const { response, serverId, unreached } = await this.call(method, request, { signal });
    return { response: response as never, serverId, unreached };
  };

  /** servers are the servers it sends to. */
  get servers(): readonly string[] {
    return this.urls;
  }

  /** going is the server calls go to once one answers them (the leader its watch found); undefined while none does. */
  get going(): string | undefined {
    return this.reach.caughtUp ? this.following.current : undefined;
  }

  /** silent are the servers whose watch left a PING unanswered and has not heard them since (paused, stalled or cut off). */
  get silent(): string[] {
    return this.urls.filter((url) => this.silentAt(url));
  }

  /** silentAt is whether the watch of `url` found it silent (ServerWatch.silent). */
  private silentAt(url: string): boolean {
    return this.watches.get(url)?.silent === true;
  }

  /** setUrls replaces the servers (the members found by DNS: UpstreamDiscovery), and watches the new ones. */
  setUrls(urls: readonly string[]): void {
    this.urls = urls.map((url) => url.trim().replace(/\/$/, ""));
    this.following.setServers(this.urls);
    this.watch();
  }

  /** close stops the watches and the connections. */
  close(): void {
    clearTimeout(this.giveUpTimer);
    for (const watch of this.watches.values()) watch.close();
    this.watches.clear();
    this.transports.close();
  }

  /**
   * call sends one call upstream, held within the hold and the caller's
   * deadline, and answers the server's response, or its error as the
   * server gave it (code, message, details, its server id alone); a call
   * no server answered within the hold is UNAVAILABLE
   * REASON_UPSTREAM_UNAVAILABLE, and a lookup none answered past
   * --read-hold is all misses (readOrMiss).
   */
  private async call(
    method: Method,
    request: unknown,
    options: Pick<CallOptions, "signal" | "timeoutMs">,
  ): Promise<{ response: unknown; serverId?: string; unreached?: boolean }> {
    const started = performance.now();
    const holdMs = Math.min(this.config.holdMs, options.timeoutMs ?? Number.POSITIVE_INFINITY);
    try {
      const spread = await this.reads?.read(method, request, options);
      if (spread !== undefined) {
        this.config.metrics.observeUpstream(method, (performance.now() - started) / 1_000, false);
        return spread;
      }
      // The caller's deadline goes upstream; without one, none: a connection that stops answering fails its calls by its pings.
      // A lookup's answer may be a member's misses (it knew no leader for its --read-hold): its mark goes on with it.
      const lookup = LOOKUPS.has(method);
      let marked = false;
      const onHeader = (headers: Headers) => {
        this.reads?.heard(headers);
        if (lookup && headers.get(UNREACHED_HEADER) === "1") marked = true;
      };
      const heard = this.reads === undefined && !lookup ? options : { ...options, onHeader };
      const sent =
        lookup && this.config.readHoldMs > 0
          ? await this.readOrMiss(method, request, heard, holdMs)
          : await this.gathering.call(method, request, heard, holdMs);
      if (sent === undefined) return this.misses(method, request as RequestOf<"batchExists">);
      const { response, serverId, attempts } = sent;
      this.config.metrics.observeUpstream(method, (performance.now() - started) / 1_000, attempts > 1);
      // An answer shows a server answers calls (a standby given alone forwards them, though its watch says it does not lead);
      // the next end of a watch's stream (the server gone) is heard, and judged again. A member's misses show none does.
      if (!marked) {
        this.reach.set(true);
        this.armGiveUp();
      }
      return marked ? { response, serverId: serverId ?? undefined, unreached: true } : { response, serverId: serverId ?? undefined };
    } catch (e) {
      const error = ConnectError.from(e);
      this.config.metrics.observeUpstream(method, (performance.now() - started) / 1_000, true);
      throw answerOf(error, firstServerId(error));
    }
  }

  /**
   * readOrMiss sends a lookup (LOOKUPS) as any call, and gives it up
   * (undefined) once no server has answered calls for --read-hold: vLLM's
   * scheduler waits on its BatchExists, without a deadline, before it
   * schedules anything, and a worker's load on its GetLocations. Held as a
   * write is, they would stop an engine for the whole hold, and for each of
   * its client's retries, while the metadata cluster is out of reach; a
   * miss costs a recompute. A lookup given up goes on upstream within the
   * hold (or until its caller leaves), its answer unused.
   */
  private readOrMiss(method: Method, request: unknown, options: CallOptions, holdMs: number): Promise<Sent | undefined> {
    if (this.reach.downMs() >= this.config.readHoldMs) return Promise.resolve(undefined);
    return this.lookups.race(this.gathering.call(method, request, options, holdMs));
  }

  /** armGiveUp gives up the lookups on their way (readOrMiss) once no server has answered calls for --read-hold, and stops waiting to while one does. */
  private armGiveUp(): void {
    if (this.reach.caughtUp || this.config.readHoldMs <= 0) {
      clearTimeout(this.giveUpTimer);
      this.giveUpTimer = undefined;
      return;
    }
    if (this.giveUpTimer !== undefined) return;
    this.giveUpTimer = setTimeout(
      () => {
        this.giveUpTimer = undefined;
        if (this.reach.caughtUp) return;
        this.lookups.giveUp();
      },
      Math.max(0, this.config.readHoldMs - this.reach.downMs()),
    );
    this.giveUpTimer.unref();
  }

  /** misses answers a lookup no server answered as a miss for every key (UNREACHED_HEADER), counted, and logged once while no server answers. */
  private misses(method: Method, request: RequestOf<"batchExists" | "getLocations">): { response: unknown; unreached: true } {
    this.config.metrics.unreachedRead(method);
    if (this.reach.firstMiss())
      this.logger.warn(
        { readHoldMs: this.config.readHoldMs },
        "upstream: no server answered calls for --read-hold; lookups are answered as misses until one does",
      );
    return { response: missesOf(method as Lookup, request), unreached: true };
  }

  /** watch watches the servers not watched yet, and stops watching those gone. */
  private watch(): void {
    for (const [url, watch] of this.watches) {
      if (this.urls.includes(url)) continue;
      watch.close();
      this.watches.delete(url);
    }
    const header = callHeader(this.config.token);
    for (const url of this.urls)
      if (!this.watches.has(url)) this.watches.set(url, new ServerWatch(url, this.config.tls, header, this.reads !== undefined, this.changed));
    this.changed();
  }

  /** changed moves calls to a server that leads once one does, sets the reach, and hands the caught-up servers to the reads. */
  private readonly changed = (): void => {
    const serving = this.urls.filter((url) => this.watches.get(url)?.leads.serving === true);
    if (serving.length > 0 && !serving.includes(this.following.current)) this.following.prefer(serving[0]!);
    this.reach.set(serving.length > 0);
    this.armGiveUp();
    this.reads?.follow(this.urls.filter((url) => this.watches.get(url)?.caughtUp?.serving === true));
  };
}

/**
 * Reach is whether the relay reaches a server that answers calls, shaped
 * as health reads a cluster member's leadership (healthService): SERVING
 * while it does. Each change is logged.
 */
export class Reach {
  private up = false;
  /** downSince is when the last server that answered calls stopped (the relay's start, before any did). */
  private downSince = performance.now();
  /** missed: a lookup was answered as misses since downSince (firstMiss). */
  private missed = false;
  private readonly notifier = new Notifier();

  constructor(private readonly logger: Logger) {}

  get caughtUp(): boolean {
    return this.up;
  }

  get refusal(): MetadataError | undefined {
    return this.up ? undefined : UNREACHED;
  }

  /** firstMiss is true once per spell without a server that answers calls: the first lookup answered as misses in it is logged. */
  firstMiss(): boolean {
    if (this.up || this.missed) return false;
    this.missed = true;
    return true;
  }

  /** set records whether a server answers, and tells the watchers and the log of a change. */
  set(up: boolean): void {
    if (up === this.up) return;
    this.up = up;
    if (!up) this.downSince = performance.now();
    this.missed = false;
    if (up) this.logger.info("upstream: a server answers calls");
    else this.logger.warn("upstream: no server answers calls; calls are held until one does, within --hold");
    this.notifier.notify();
  }

  next(signal: AbortSignal): Promise<void> {
    return this.notifier.next(signal);
  }

  /** downMs is how long no server has answered calls (0 while one does). */
  downMs(): number {
    return this.up ? 0 : performance.now() - this.downSince;
  }
}

/** UNREACHED is the reach's refusal while no upstream server answers calls. */
const UNREACHED = new MetadataError(Reason.UPSTREAM_UNAVAILABLE, "the relay reaches no upstream server that answers calls");

/** firstServerId is the server id an error's metadata carries (headers and trailers merged: "id, id" over gRPC). */
function firstServerId(error: ConnectError): string | undefined {
  return error.metadata.get(SERVER_ID_HEADER)?.split(",")[0]?.trim() || undefined;
}

/**
 * answerOf is the error a relay's caller gets for an upstream error: the
 * same code, message and details, and of the upstream's metadata only its
 * server id (its other headers are of that exchange, not this one). A call
 * whose hold was spent (UNAVAILABLE: LeaderFollowing retries every other
 * UNAVAILABLE) is REASON_UPSTREAM_UNAVAILABLE.
 */
function answerOf(error: ConnectError, serverId: string | undefined): ConnectError {
  const metadata = new Headers();
  if (serverId !== undefined) metadata.set(SERVER_ID_HEADER, serverId);
  if (error.code !== Code.Unavailable) {
    const answer = new ConnectError(error.rawMessage, error.code, metadata);
    answer.details.push(...error.details); // as received: connect-node writes them back as they came
    return answer;
  }
  return new ConnectError(`relay: ${error.rawMessage}`, Code.Unavailable, metadata, [
    { desc: ErrorInfoSchema, value: { reason: Reason.UPSTREAM_UNAVAILABLE, namespace: "" } },
  ]);
}
