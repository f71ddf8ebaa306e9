/**
 * StateOptions are the rules a MetadataState enforces. Durations are in
 * milliseconds; every option has a default.
 */
export interface StateOptions {
  /** reservationTtlMs is how long a RESERVED page waits for its ConfirmWrite. Defaults to 60 s. */
  reservationTtlMs: number;
  /** readLeaseTtlMs is how long GetLocations protects a found key from eviction and its pages from reuse. Defaults to 10 s. */
  readLeaseTtlMs: number;
  /** incompleteTtlMs is how long a key may stay confirmed on only some ranks before its pages are reclaimed. Defaults to 10 min. */
  incompleteTtlMs: number;
  /** maxKeysPerCall bounds the keys (and pages) of one call. Defaults to 65,536. */
  maxKeysPerCall: number;
  /** maxKeyBytes bounds the UTF-8 length of a key and of a namespace name. Defaults to 1,024. */
  maxKeyBytes: number;
  /** maxRanksPerNamespace bounds the ranks of a namespace, and so a declared world_size. Defaults to 1,024. */
  maxRanksPerNamespace: number;
  /** maxNamespaces bounds the namespaces of the server. Defaults to 1,024. */
  maxNamespaces: number;
  /** eviction chooses what is evicted: "prefix" keeps what prefix matches reach (orphans, then leaves, then LRU); "lru" is plain LRU. Defaults to "prefix". */
  eviction: EvictionPolicy;
  /** evictHighWatermark: a rank with more than this fraction of its pages held is evicted ahead of need (evictAhead); 1 never. Defaults to 0.95. */
  evictHighWatermark: number;
  /** evictLowWatermark is the fraction of held pages that evicting ahead of need brings a rank down to. Defaults to 0.90. */
  evictLowWatermark: number;
}

/** EvictionPolicy names the eviction orders (StateOptions.eviction). */
export const EVICTION_POLICIES = ["prefix", "lru"] as const;
export type EvictionPolicy = (typeof EVICTION_POLICIES)[number];

/** defaultStateOptions are the documented defaults. */
export const defaultStateOptions: StateOptions = {
  reservationTtlMs: 60_000,
  readLeaseTtlMs: 10_000,
  incompleteTtlMs: 600_000,
  maxKeysPerCall: 65_536,
  maxKeyBytes: 1_024,
  maxRanksPerNamespace: 1_024,
  maxNamespaces: 1_024,
  eviction: "prefix",
  evictHighWatermark: 0.95,
  evictLowWatermark: 0.9,
};

/**
 * MAX_RANKS_PER_NAMESPACE is the largest --max-ranks-per-namespace: a rank's
 * slot is kept in an int16 and a key's count of ranks in a uint16, per key
 * (KeyColumns).
 */
export const MAX_RANKS_PER_NAMESPACE = 32_767;

/** MAX_NUM_PAGES is the largest page count of a rank: page indexes are int32. */
export const MAX_NUM_PAGES = 2 ** 31 - 1;

/** DEFAULT_NAMESPACE is the namespace of a request that names none. */
export const DEFAULT_NAMESPACE = "kv";
