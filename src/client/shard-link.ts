import type { MessageInitShape } from "@bufbuild/protobuf";
import { type CallOptions, Code, ConnectError } from "@connectrpc/connect";
import { ErrorInfoSchema, type InitializeRankRequestSchema, Reason, Role } from "../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { SERVER_ID_HEADER } from "../protocol/headers.js";
import { DEFAULT_CALL_LIMITS } from "../service/limit-options.js";
import { Gathering } from "./gathering.js";
import type { LeaderFollowing, Method } from "./leader-following.js";

/** InitRequest is an InitializeRank call the client remembers. */
export type InitRequest = MessageInitShape<typeof InitializeRankRequestSchema>;

/**
 * ShardLink is the client's way to one server, or one shard's members: its
 * calls, retried and following the leader, and the server id it last
 * answered with; when that changes (the server restarted and lost its
 * state) or it answers RANK_NOT_INITIALIZED, the ranks initialized through
 * the client are initialized there again. The calls of the cycle that
 * come in one turn of the event loop, or while two are on their way,
 * leave together as a Batch (Gathering, as a relay's), but those with call
 * options besides a signal (a timeout, headers, header hooks), which a
 * Batch would not keep. Its Batches stay within a default server's limits:
 * a server of lower ones refuses one whole, its calls go again alone, and
 * the next Batches are half as large.
 */
export class ShardLink {
  private serverId: string | undefined;
  private readonly gathering: Gathering;

  constructor(
    private readonly following: LeaderFollowing,
    private readonly initialized: Map<string, InitRequest>,
    private readonly seen: (serverId: string) => void,
  ) {
    this.gathering = new Gathering(
      (method, request, options, holdMs) => following.call(method, request, options, holdMs),
      DEFAULT_CALL_LIMITS,
      following.deadlineMs,
    );
  }

  /** call makes a call; RANK_NOT_INITIALIZED after a restart initializes the ranks again and sends it once more. */
  async call(method: Method, request: unknown, callOptions: CallOptions | undefined): Promise<unknown> {
    try {
      const { response, restarted } = await this.attempt(method, request, callOptions);
      if (method === "initializeRank") this.remember(request as InitRequest);
      else if (restarted) await this.reinitialize();
      return response;
    } catch (e) {
      if (method === "initializeRank" || this.initialized.size === 0 || !isRankNotInitialized(e)) throw e;
      await this.reinitialize();
      return (await this.attempt(method, request, callOptions)).response;
    }
  }

  /** attempt makes one call with retries on UNAVAILABLE; it notes the server id of every answer. */
  private async attempt<R>(method: Method, request: unknown, callOptions: CallOptions | undefined): Promise<{ response: R; restarted: boolean }> {
    try {
      const gathered = callOptions === undefined || Object.keys(callOptions).every((option) => option === "signal");
      const { response, serverId: id } = gathered
        ? await this.gathering.call(method, request, callOptions, this.following.deadlineMs)
        : await this.following.call<R>(method, request, callOptions);
      return { response: response as R, restarted: this.noteServerId(id) };
    } catch (e) {
      // An error's metadata merges headers and trailers: "id, id" over gRPC.
      if (e instanceof ConnectError) this.noteServerId(e.metadata.get(SERVER_ID_HEADER)?.split(",")[0]?.trim() ?? null);
      throw e;
    }
  }

  /** noteServerId records the server id of an answer; true when it changed (a restart that lost state). */
  private noteServerId(id: string | null): boolean {
    if (id === null || id === this.serverId) return false;
    const changed = this.serverId !== undefined;
    this.serverId = id;
    this.seen(id);
    return changed;
  }

  private async reinitialize(): Promise<void> {
    for (const request of this.initialized.values()) await this.attempt("initializeRank", request, undefined);
  }

  private remember(request: InitRequest): void {
    if (request.role === Role.SCHEDULER) return;
    this.initialized.set(`${request.namespace ?? ""}\u0000${request.rank ?? 0}`, request);
  }

  /** setServers hands it a shard's members anew (the topology changed). */
  setServers(urls: readonly string[]): void {
    this.following.setServers(urls);
  }
}

function isRankNotInitialized(e: unknown): boolean {
  if (!(e instanceof ConnectError) || e.code !== Code.FailedPrecondition) return false;
  return e.findDetails(ErrorInfoSchema).some((d) => d.reason === Reason.RANK_NOT_INITIALIZED);
}
