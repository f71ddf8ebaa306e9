import type { ConnectError, Interceptor } from "@connectrpc/connect";
import type { MetadataError } from "../core/errors.js";
import { DEFAULT_NAMESPACE } from "../core/options.js";
import { toConnectError } from "./error-table.js";
import { SERVER_ID_HEADER } from "./server-id-header.js";

/** Lifecycle tells whether the server still accepts calls. */
export interface Lifecycle {
  /** refusal is the error every new call gets once the server stops accepting (shutting down, store failed); undefined while it accepts. */
  readonly refusal: MetadataError | undefined;
}

/**
 * callAtEdge is the one edge between the core and the wire, used by every
 * RPC path: it refuses calls once the server stops accepting, and turns
 * every error into a ConnectError with an ErrorInfo detail (error-table.ts)
 * and the server id in its metadata (gRPC clients read an error's metadata
 * from the trailers).
 */
export async function callAtEdge<T>(lifecycle: Lifecycle, serverId: string, message: unknown, call: () => Promise<T>): Promise<T> {
  try {
    if (lifecycle.refusal !== undefined) throw lifecycle.refusal;
    return await call();
  } catch (error) {
    throw edgeError(error, serverId, message);
  }
}

/** edgeError maps anything a call threw to the ConnectError sent to the client. */
export function edgeError(error: unknown, serverId: string, message: unknown): ConnectError {
  const connectError = toConnectError(error, namespaceOf(message));
  connectError.metadata.set(SERVER_ID_HEADER, serverId);
  return connectError;
}

/** serviceInterceptor puts callAtEdge around every call that connect-node serves. */
export function serviceInterceptor(lifecycle: Lifecycle, serverId: string): Interceptor {
  return (next) => (req) => callAtEdge(lifecycle, serverId, req.message, () => next(req));
}

/** namespaceOf reads the namespace of a request message, for error details. */
function namespaceOf(message: unknown): string {
  const namespace = (message as { namespace?: unknown } | undefined)?.namespace;
  return typeof namespace === "string" && namespace !== "" ? namespace : DEFAULT_NAMESPACE;
}
