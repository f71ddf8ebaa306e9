/**
 * The core's public face: what the layers above it (the store, the service,
 * replication, the server, the CLI) may use of the state machine. Every
 * import from outside src/core comes through here (`npm run lint`,
 * core-has-one-face), or through options.ts, the part of it a command's
 * options need before its port is bound; the rest of the core is its own.
 */
export type { Change } from "./change.js";
export {
  FORMAT_BY_TAG,
  formatOf,
  isPreParentKeyValue,
  type LogField,
  type RecordKey,
  type RecordValue,
  readerOf,
} from "./change-formats.js";
export { type Clock, systemClock } from "./clock.js";
export { invalidArgument, limitExceeded, MetadataError, Reason } from "./errors.js";
export { KeyList, type Keys } from "./key-list.js";
export { addCounts, NAMESPACE_COUNTERS, type NamespaceCounts } from "./namespace-counters.js";
// The face for options (the option tables, the state options, the namespace rule) is part of this one.
export * from "./options.js";
export { actedRank, askedRank } from "./rank-view.js";
export type { Restoring } from "./recovery.js";
export { ReplayState } from "./replay-state.js";
export { chainPrefixes, keyShard, keyShards, pageShard, type ShardPart } from "./shards.js";
export { KeyScope, MetadataState, type NamespaceStatsView } from "./state.js";
export type { StateReads } from "./state-reads.js";
export { allocateCall, type CallLimits, checkInt32, checkUint32, confirmCall, keysCall, namespaceName } from "./validate.js";
