import { type Client, createClient } from "@connectrpc/connect";
import { Health } from "../../gen/grpc/health/v1/health_pb.js";
import { type MetadataClientOptions, transportFor } from "./metadata-client.js";

/** createHealthClient returns a grpc.health.v1.Health client of the server, on the same transports as createMetadataClient (no retries: a probe reports what it sees). */
export function createHealthClient(
  options: Pick<MetadataClientOptions, "baseUrl" | "protocol" | "httpVersion" | "token" | "tls" | "transport">,
): Client<typeof Health> {
  return createClient(Health, options.transport ?? transportFor(options));
}
