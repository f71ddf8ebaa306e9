import { KeyList, type Keys, keyListOf } from "./key-list.js";
import { PrefixedHash } from "./key-table.js";
import { DEFAULT_NAMESPACE } from "./state-options.js";

/**
 * ShardPart is the part of a cluster's pages and keys that one state owns:
 * shard `index` of `count`. A rank's page p belongs to shard p mod count; a
 * key to shard keyShard(namespace, key, count). WHOLE is a state that owns
 * everything (a single node, or a cluster of one shard).
 */
export interface ShardPart {
  readonly count: number;
  readonly index: number;
}

/** WHOLE owns every page and key. */
export const WHOLE: ShardPart = { count: 1, index: 0 };

/** SHARD_HASH_SEPARATOR joins a namespace and a key in what keyShard hashes (a namespace cannot hold it). */
const SHARD_HASH_SEPARATOR = "\x1f";

/**
 * keyShard is the shard a key belongs to, in any language: MurmurHash3
 * (x86, 32 bits, seed 0) of the UTF-8 bytes of the namespace (as the
 * server names it: "" is "kv"), the byte 0x1F, and the UTF-8 bytes of the
 * key, as an unsigned number, modulo the number of shards
 * (docs/contract.md has test vectors).
 */
export function keyShard(namespace: string, key: string, count: number): number {
  return keyShards(namespace, [key], count)[0]!;
}

/**
 * keyShards is keyShard of every key of a call: the namespace is hashed
 * once (PrefixedHash), and the keys where they lie as bytes: a decoded
 * request's own (a KeyList), with no string made or bytes copied, or
 * strings encoded once.
 */
export function keyShards(namespace: string, keys: Keys, count: number): number[] {
  const shards = new Array<number>(keys.length).fill(0);
  if (count === 1) return shards;
  const list = keys instanceof KeyList ? keys : keyListOf(keys);
  const hash = new PrefixedHash(Buffer.from((namespace === "" ? DEFAULT_NAMESPACE : namespace) + SHARD_HASH_SEPARATOR, "utf8"));
  const view = list.view;
  for (let i = 0; i < list.length; i++) shards[i] = (hash.of(list.bytes, list.starts[i]!, list.ends[i]!, view) >>> 0) % count;
  return shards;
}

/** foreignKey is the first key of a call that another shard than `part` owns, and that shard; undefined when the part owns them all. */
export function foreignKey(namespace: string, keys: KeyList, part: ShardPart): { position: number; shard: number } | undefined {
  if (part.count === 1) return undefined;
  const shards = keyShards(namespace, keys, part.count);
  const position = shards.findIndex((shard) => shard !== part.index);
  return position < 0 ? undefined : { position, shard: shards[position]! };
}

/** ownsKey tells whether a part owns key i of a list (of a namespace as the server names it). */
export function ownsKey(namespace: string, keys: KeyList, i: number, part: ShardPart): boolean {
  return part.count === 1 || keyShards(namespace, keys.pick([i]), part.count)[0] === part.index;
}

/**
 * chainPrefixes gives each key of a call split among shards (`shards[i]`
 * is key i's) the prefix key its shard is sent, as a source: p ≥ 0 is
 * keys[p], -1 - j is prefixes[j]. A key that extends the key before it in
 * the call (a chain, as engines send them) where that key is another
 * shard's gets the nearest earlier key of the same chain on its own shard,
 * or, with none, the prefix the chain started from in the call (empty: a
 * root; another call's key: that key); every other key keeps its own. So
 * a shard's keys of a chain are a chain there too, and its eviction takes
 * them from their tip back, as one node's would.
 */
export function chainPrefixes(keys: KeyList, prefixes: KeyList, shards: readonly number[]): Int32Array {
  const sources = new Int32Array(keys.length);
  // nearest[s] is the last position of the running chain on shard s; origin, the position whose prefix the chain started from.
  const nearest = new Map<number, number>();
  let origin = 0;
  for (let i = 0; i < keys.length; i++) {
    sources[i] = -1 - i;
    const shard = shards[i]!;
    if (i === 0 || prefixes.byteLength(i) === 0 || !prefixes.equals(i, keys, i - 1)) {
      nearest.clear();
      origin = i;
    } else if (shards[i - 1] !== shard) {
      const near = nearest.get(shard);
      // (A key repeated in its own chain keeps its prefix: a key is never sent as its own prefix.)
      if (near !== undefined && !keys.equals(near, keys, i)) sources[i] = near;
      else if (near === undefined && !prefixes.equals(origin, keys, i)) sources[i] = -1 - origin;
    }
    nearest.set(shard, i);
  }
  return sources;
}

/** pageShard is the shard a rank's page belongs to. */
export function pageShard(page: number, count: number): number {
  return page % count;
}

/** ownedPages is how many of a rank's numPages pages a part owns: those p below numPages with p mod count = index. */
export function ownedPages(numPages: number, part: ShardPart): number {
  return numPages <= part.index ? 0 : Math.floor((numPages - part.index - 1) / part.count) + 1;
}

/** firstOwnedFrom is the first page at or above `page` that a part owns. */
export function firstOwnedFrom(page: number, part: ShardPart): number {
  return page + ((part.index - (page % part.count) + part.count) % part.count);
}

/** owns tells whether a part owns a rank's page. */
export function owns(part: ShardPart, page: number): boolean {
  return page % part.count === part.index;
}
