export { createMetadataClient, type MetadataClient, type MetadataClientOptions } from "./metadata-client.js";
export { defaultRetryPolicy, type RetryPolicy } from "./backoff.js";
export { createHealthClient } from "./health-client.js";
