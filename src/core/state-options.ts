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

/** MAX_SHARDS is the largest --shards. */
export const MAX_SHARDS = 256;

/** MAX_KEY_BYTES is the largest --max-key-bytes: a namespace name is part of LMDB keys of at most 1,978 bytes. */
export const MAX_KEY_BYTES = 1_024;

/**
 * STATE_OPTIONS are the rules a MetadataState enforces: its TTLs, its
 * limits and its eviction. Durations are in milliseconds.
 */
export const STATE_OPTIONS = optionTable({
  reservationTtlMs: { kind: "duration", default: 60_000 },
  readLeaseTtlMs: {
    kind: "duration",
    default: 10_000,
  },
  incompleteTtlMs: {
    kind: "duration",
    default: 600_000,
  },
  maxKeysPerCall: { kind: "integer", min: 1, default: 65_536 },
  maxKeyBytes: {
    kind: "integer",
    min: 1,
    max: MAX_KEY_BYTES,
    why: "namespace names are keys of the store",
    default: 1_024,
  },
  maxRanksPerNamespace: {
    kind: "integer",
    min: 1,
    max: MAX_RANKS_PER_NAMESPACE,
    why: "the key columns count a key's ranks in 16 bits",
    default: 1_024,
  },
  maxNamespaces: { kind: "integer", min: 1, default: 1_024 },
  eviction: {
    kind: "string",
    choices: EVICTION_POLICIES,
    default: "prefix",
  },
  evictHighWatermark: {
    kind: "fraction",
    default: 0.95,
  },
  evictLowWatermark: {
    kind: "fraction",
    default: 0.9,
  },
  /** shards and shard: the state is shard `shard` of `shards` (shards.ts): it hands out only that part of every rank's pages. */
  shards: { kind: "integer", min: 1, max: MAX_SHARDS, default: 1 },
  shard: { kind: "integer", min: 0, max: MAX_SHARDS - 1, default: 0 },
});

/** StateOptions are the rules a MetadataState enforces (STATE_OPTIONS). */
export type StateOptions = OptionsOf<typeof STATE_OPTIONS>;

/** defaultStateOptions are the documented defaults. */
export const defaultStateOptions: StateOptions = defaultsOf(STATE_OPTIONS);

/** checkStateOptions throws a RangeError naming the first option past its rules, as `name` names it (a field, or a flag). */
export function checkStateOptions(options: StateOptions, name: NameOf = (field) => field): void {
  checkBounds(STATE_OPTIONS, options, name);
  checkWatermarks(options, name);
  checkShard(options, name);
}

/** checkShard checks that the state's shard is one of the shards. */
export function checkShard({ shards, shard }: StateOptions, name: NameOf): void {
  if (shard >= shards) throw new RangeError(`${name("shard")} must be below ${name("shards")} (${shards}): shards count from 0, got ${shard}`);
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
