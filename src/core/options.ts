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
}

/** defaultStateOptions are the documented defaults. */
export const defaultStateOptions: StateOptions = {
  reservationTtlMs: 60_000,
  readLeaseTtlMs: 10_000,
  incompleteTtlMs: 600_000,
  maxKeysPerCall: 65_536,
  maxKeyBytes: 1_024,
  maxRanksPerNamespace: 1_024,
  maxNamespaces: 1_024,
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
