import type { Interceptor } from "@connectrpc/connect";
import { DEFAULT_NAMESPACE } from "../core/options.js";
import type { MetadataError } from "../core/errors.js";
import { toConnectError } from "./error-table.js";
import { SERVER_ID_HEADER } from "./server-id-header.js";

/** Lifecycle tells whether the server still accepts calls. */
export interface Lifecycle {
  /** refusal is the error every new call gets once the server stops accepting (shutting down, store failed); undefined while it accepts. */
  readonly refusal: MetadataError | undefined;
}

/**
 * serviceInterceptor is the one edge between the core and the wire: it
 * refuses calls once the server is shutting down and turns every error into
 * a ConnectError with an ErrorInfo detail (see error-table.ts). Errors also
 * carry the server id in their metadata, because gRPC clients read an
 * error's metadata from the trailers.
 */
export function serviceInterceptor(lifecycle: Lifecycle, serverId: string): Interceptor {
  return (next) => async (req) => {
    try {
      if (lifecycle.refusal !== undefined) throw lifecycle.refusal;
      return await next(req);
    } catch (error) {
      const connectError = toConnectError(error, namespaceOf(req.message));
      connectError.metadata.set(SERVER_ID_HEADER, serverId);
      throw connectError;
    }
  };
}

/** namespaceOf reads the namespace of a request message, for error details. */
function namespaceOf(message: unknown): string {
  const namespace = (message as { namespace?: unknown } | undefined)?.namespace;
  return typeof namespace === "string" && namespace !== "" ? namespace : DEFAULT_NAMESPACE;
}
