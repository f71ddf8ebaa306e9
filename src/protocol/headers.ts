/**
 * SERVER_ID_HEADER is the response header (and, on errors, trailer) that
 * carries the server's state lifetime id on every response of every RPC and
 * route. A client that sees it change knows the server lost its state.
 */
export const SERVER_ID_HEADER = "hf3fs-server-id";
