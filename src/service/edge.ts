import type { Code, Interceptor } from "@connectrpc/connect";
import { codeToString } from "@connectrpc/connect/protocol-connect";
import { DEFAULT_NAMESPACE } from "../core/options.js";
import { toConnectError } from "./error-table.js";
import type { Lifecycle } from "./lifecycle.js";
import { SERVER_ID_HEADER } from "./server-id-header.js";

/** CallObserver hears of every call: its method, its code ("ok" or a gRPC code name) and its duration. */
export type CallObserver = (method: string, code: string, seconds: number) => void;

/** Edge is what every RPC path shares at the boundary between the core and the wire. */
export interface Edge {
  readonly lifecycle: Lifecycle;
  readonly serverId: string;
  readonly observe: CallObserver;
}

/**
 * callAtEdge is the one edge between the core and the wire, used by every
 * RPC path: it refuses calls once the server stops accepting, turns every
 * error into a ConnectError with an ErrorInfo detail (error-table.ts) and
 * the server id in its metadata (gRPC clients read an error's metadata from
 * the trailers), and reports the call to the observer. `request` gives the
 * decoded request, if any, for the namespace of error details.
 */
export async function callAtEdge<T>(edge: Edge, method: string, request: () => unknown, call: () => Promise<T>): Promise<T> {
  const started = performance.now();
  try {
    if (edge.lifecycle.refusal !== undefined) throw edge.lifecycle.refusal;
    const result = await call();
    edge.observe(method, "ok", (performance.now() - started) / 1_000);
    return result;
  } catch (error) {
    const connectError = toConnectError(error, namespaceOf(request()));
    connectError.metadata.set(SERVER_ID_HEADER, edge.serverId);
    edge.observe(method, codeName(connectError.code), (performance.now() - started) / 1_000);
    throw connectError;
  }
}

/** codeName is the label of a code in metrics and JSON errors, e.g. "failed_precondition". */
export function codeName(code: Code): string {
  return codeToString(code);
}

/** serviceInterceptor puts callAtEdge around every call that connect-node serves. */
export function serviceInterceptor(edge: Edge): Interceptor {
  return (next) => (req) => callAtEdge(edge, req.method.name, () => req.message, () => next(req));
}

/** namespaceOf reads the namespace of a request message, for error details. */
function namespaceOf(message: unknown): string {
  const namespace = (message as { namespace?: unknown } | undefined)?.namespace;
  return typeof namespace === "string" && namespace !== "" ? namespace : DEFAULT_NAMESPACE;
}
