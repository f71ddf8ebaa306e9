import { type CallOptions, Code, ConnectError, createClient, type Transport } from "@connectrpc/connect";
import { MetadataService } from "../../gen/hf3fs/metadata/v1/metadata_pb.js";
import type { Method } from "../client/leader-following.js";
import { LOG_POSITION, MIN_POSITION, SERVER_ID_HEADER } from "../protocol/headers.js";
import { READS } from "../service/metadata-calls.js";

/** PASSED_ON are the failures of a read at a member that send it to the leader: the member, not the read, failed. */
const PASSED_ON: ReadonlySet<Code> = new Set([Code.Unavailable, Code.DeadlineExceeded, Code.Unknown, Code.Internal, Code.ResourceExhausted]);

/** READ_TIMEOUT_MS bounds a read sent to one member: one that does not answer by then (paused) leaves the read to the leader. */
const READ_TIMEOUT_MS = 1_000;

/**
 * ReadSpreading sends a cluster's reads (BatchExists, GetStats) to its
 * caught-up standbys in turn instead of to the leader, whose one event
 * loop every write needs: a standby answers
 * them itself while it holds the log within its --standby-read-lag, and
 * passes them to the leader otherwise. Every read names the highest log
 * position of the answers the relay passed back (MIN_POSITION), so no
 * caller of the relay reads before a write the relay acknowledged; until
 * an answer named one, reads go to the leader, whose answer names at least
 * every write acknowledged before it (a relay just started, or upstreams
 * just made for the shards of a topology, know no position yet). Members
 * count as caught up while their health ("": loaded and caught up) says
 * SERVING (the relay watches it); a read a member fails (unavailable, no answer
 * within READ_TIMEOUT_MS) goes to the leader.
 */
export class ReadSpreading {
  private readable: string[] = [];
  private next = 0;
  private position = 0;
  /** known is whether an answer named a log position yet. */
  private known = false;

  constructor(
    private readonly transportFor: (url: string) => Transport,
    /** leader is the member calls go to now ("" while unknown): reads go to the others. */
    private readonly leader: () => string,
  ) {}

  /** heard notes an answer's log position (LOG_POSITION), from any member. */
  heard(headers: Headers): void {
    const position = Number(headers.get(LOG_POSITION) ?? Number.NaN);
    if (!Number.isSafeInteger(position)) return;
    this.known = true;
    if (position > this.position) this.position = position;
  }

  /** follow takes the members that are loaded and caught up now (health "" SERVING, as their watches say). */
  follow(urls: readonly string[]): void {
    this.readable = [...urls];
  }

  /**
   * read sends a read to the next caught-up standby, with the relay's
   * position; undefined when the call is not one to spread, no position
   * is known yet, no standby is known to be caught up, or the standby
   * failed it (the caller then sends it to the leader as any call).
   */
  async read(
    method: Method,
    request: unknown,
    options: Pick<CallOptions, "signal" | "timeoutMs">,
  ): Promise<{ response: unknown; serverId?: string } | undefined> {
    if (!READS.has(method) || !this.known || this.readable.length < 2) return undefined;
    const leader = this.leader();
    const standbys = this.readable.filter((url) => url !== leader);
    if (standbys.length === 0) return undefined;
    const url = standbys[this.next++ % standbys.length]!;
    let serverId: string | undefined;
    try {
      const client = createClient(MetadataService, this.transportFor(url));
      const response = await (client[method] as (r: unknown, o: CallOptions) => Promise<unknown>)(request, {
        signal: options.signal,
        timeoutMs: Math.min(options.timeoutMs ?? READ_TIMEOUT_MS, READ_TIMEOUT_MS),
        headers: { [MIN_POSITION]: String(this.position) },
        onHeader: (headers) => {
          serverId = headers.get(SERVER_ID_HEADER) ?? undefined;
          this.heard(headers);
        },
      });
      return { response, serverId };
    } catch (e) {
      // The member's own answer (a bad request, a rank not initialized) is the leader's too: it goes back as it is.
      const error = ConnectError.from(e);
      if (!PASSED_ON.has(error.code) || options.signal?.aborted) throw error;
      return undefined;
    }
  }
}
