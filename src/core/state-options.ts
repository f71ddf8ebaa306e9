import { checkBounds, defaultsOf, type NameOf, type OptionsOf, optionTable } from "./option-table.js";

/** EvictionPolicy names the eviction orders (StateOptions.eviction). */
export const EVICTION_POLICIES = ["prefix", "lru"] as const;
export type EvictionPolicy = (typeof EVICTION_POLICIES)[number];

/**
 * MAX_RANKS_PER_NAMESPACE is the largest --max-ranks-per-namespace: a rank's
 * slot is kept in an int16 and a key's count of ranks in a uint16, per key
 * (KeyColumns).
 */
export const MAX_RANKS_PER_NAMESPACE = 32_767;

/** MAX_KEY_BYTES is the largest --max-key-bytes: a namespace name is part of LMDB keys of at most 1,978 bytes. */
export const MAX_KEY_BYTES = 1_024;

/**
 * STATE_OPTIONS are the rules a MetadataState enforces: its TTLs, its
 * limits and its eviction. Durations are in milliseconds.
 */
export const STATE_OPTIONS = optionTable({
  reservationTtlMs: { flag: "reservation-ttl", kind: "duration", default: 60_000, help: "how long a reserved page waits for ConfirmWrite" },
  readLeaseTtlMs: {
    flag: "read-lease-ttl",
    kind: "duration",
    default: 10_000,
    help: "how long GetLocations protects a key from eviction and its pages from reuse",
  },
  incompleteTtlMs: {
    flag: "incomplete-ttl",
    kind: "duration",
    default: 600_000,
    help: "how long a key may stay confirmed on only some ranks before its pages are reclaimed",
  },
  maxKeysPerCall: { flag: "max-keys-per-call", kind: "integer", min: 1, default: 65_536, help: "keys (and pages) per call at most" },
  maxKeyBytes: {
    flag: "max-key-bytes",
    kind: "integer",
    min: 1,
    max: MAX_KEY_BYTES,
    why: "namespace names are keys of the store",
    default: 1_024,
    help: "UTF-8 bytes per key and per namespace name at most",
  },
  maxRanksPerNamespace: {
    flag: "max-ranks-per-namespace",
    kind: "integer",
    min: 1,
    max: MAX_RANKS_PER_NAMESPACE,
    why: "the key columns count a key's ranks in 16 bits",
    default: 1_024,
    help: "ranks per namespace at most (and so world_size)",
  },
  maxNamespaces: { flag: "max-namespaces", kind: "integer", min: 1, default: 1_024, help: "namespaces per server at most" },
  eviction: {
    flag: "eviction",
    kind: "string",
    choices: EVICTION_POLICIES,
    default: "prefix",
    help: "what makes room: prefix (keys no prefix match reaches, then leaves, then LRU) or lru (plain LRU)",
  },
  evictHighWatermark: {
    flag: "evict-high-watermark",
    kind: "fraction",
    default: 0.95,
    help: "a rank with more than this fraction of its pages held is evicted in the background (1: never)",
  },
  evictLowWatermark: {
    flag: "evict-low-watermark",
    kind: "fraction",
    default: 0.9,
    help: "the fraction of held pages background eviction brings a rank down to",
  },
});

/** StateOptions are the rules a MetadataState enforces (STATE_OPTIONS). */
export type StateOptions = OptionsOf<typeof STATE_OPTIONS>;

/** defaultStateOptions are the documented defaults. */
export const defaultStateOptions: StateOptions = defaultsOf(STATE_OPTIONS);

/** checkStateOptions throws a RangeError naming the first option past its rules, as `name` names it (a field, or a flag). */
export function checkStateOptions(options: StateOptions, name: NameOf = (field) => field): void {
  checkBounds(STATE_OPTIONS, options, name);
  checkWatermarks(options, name);
}

/** checkWatermarks checks that eviction ahead of need brings a rank down from the high watermark to a low one above 0. */
export function checkWatermarks({ evictHighWatermark: high, evictLowWatermark: low }: StateOptions, name: NameOf): void {
  if (!(low > 0 && low <= high && high <= 1)) {
    throw new RangeError(`${name("evictLowWatermark")} (${low}) must be above 0 and at most ${name("evictHighWatermark")} (${high}), itself at most 1`);
  }
}

/** MAX_NUM_PAGES is the largest page count of a rank: page indexes are int32. */
export const MAX_NUM_PAGES = 2 ** 31 - 1;

/** DEFAULT_NAMESPACE is the namespace of a request that names none. */
export const DEFAULT_NAMESPACE = "kv";
