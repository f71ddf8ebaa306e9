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
