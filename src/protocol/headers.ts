/**
 * SERVER_ID_HEADER is the response header (and, on errors, trailer) that
 * carries the server's state lifetime id on every response of every RPC and
 * route. A client that sees it change knows the server lost its state.
 */
export const SERVER_ID_HEADER = "hf3fs-server-id";

/**
 * SHARD_LOCAL_HEADER marks a call one shard's leader sends another in a
 * cluster split into shards: its keys are the receiver's (or the call is
 * the receiver's part of a call on a whole namespace), so the receiver
 * answers it alone and does not route it again.
 */
export const SHARD_LOCAL_HEADER = "hf3fs-shard-local";

/**
 * LOG_POSITION is the response header of a cluster member's successful
 * answer: the replicated log's position it reflects (a leader: at least its
 * last append, so at or past the answer's own write; a standby that
 * answered a read itself: the entry it applied last).
 */
export const LOG_POSITION = "hf3fs-log-position";

/**
 * MIN_POSITION is the request header of a read that must reflect the log
 * at least up to a position (a LOG_POSITION the caller was given, such as
 * its own ConfirmWrite's): a standby answers it only once it applied that
 * far, else it forwards it (read-your-writes).
 */
export const MIN_POSITION = "hf3fs-min-position";

/**
 * UNREACHED_HEADER marks a relay's BatchExists or GetLocations answer of
 * which no server answered a part ("1"): the keys of a shard that no server
 * had answered calls for --read-hold are answered as misses (absent, page
 * -1), since engines wait on these lookups without a deadline, and a miss
 * costs them only a recompute.
 */
export const UNREACHED_HEADER = "hf3fs-unreached";

/** answerHeaders are the headers that say who answered a call a process passed on: the server's id, and the mark of parts no server answered. */
export function answerHeaders(serverId: string | undefined, unreached: boolean | undefined): Record<string, string> {
  return { ...(serverId !== undefined && { [SERVER_ID_HEADER]: serverId }), ...(unreached && { [UNREACHED_HEADER]: "1" }) };
}
