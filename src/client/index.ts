export { Code, ConnectError } from "@connectrpc/connect";
export {
  AllocationStatus,
  type BatchAllocateResponse,
  type ErrorInfo,
  KeyScope,
  type NamespaceStats,
  type RankStats,
  Reason,
  Role,
} from "../../gen/hf3fs/metadata/v1/metadata_pb.js";
export { defaultRetryPolicy, type RetryPolicy } from "./backoff.js";
export { createHealthClient } from "./health-client.js";
export { type ClientTls, createMetadataClient, type MetadataClient, type MetadataClientOptions } from "./metadata-client.js";
export { MetadataError } from "./metadata-error.js";
