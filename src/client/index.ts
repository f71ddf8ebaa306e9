export { defaultRetryPolicy, type RetryPolicy } from "./backoff.js";
export { createHealthClient } from "./health-client.js";
export { type ClientTls, createMetadataClient, type MetadataClient, type MetadataClientOptions } from "./metadata-client.js";
