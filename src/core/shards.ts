import { KeyList, type Keys } from "./key-list.js";
import { hashKey, viewOf } from "./key-table.js";
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
const SHARD_HASH_SEPARATOR = 0x1f;

/** hashInput is keyShard's buffer, grown as keys need: one encoding per key, no allocation per call; hashView reads it. */
let hashInput = Buffer.allocUnsafe(4096);
let hashView = viewOf(hashInput);

/** room grows hashInput to hold size bytes; true when it did (its contents are then gone). */
function room(size: number): boolean {
  if (size <= hashInput.length) return false;
  hashInput = Buffer.allocUnsafe(Math.max(size, 2 * hashInput.length));
  hashView = viewOf(hashInput);
  return true;
}

/** writePrefix writes what keyShard hashes before the key: the namespace as the server names it ("" is "kv") and the separator; it answers the key's offset. */
function writePrefix(namespace: string): number {
  const at = hashInput.write(namespace === "" ? DEFAULT_NAMESPACE : namespace, 0, "utf8");
  hashInput[at] = SHARD_HASH_SEPARATOR;
  return at + 1;
}

/** prefixBytes is the length of writePrefix's bytes. */
function prefixBytes(namespace: string): number {
  return Buffer.byteLength(namespace === "" ? DEFAULT_NAMESPACE : namespace, "utf8") + 1;
}

/**
 * keyShard is the shard a key belongs to, in any language: MurmurHash3
 * (x86, 32 bits, seed 0) of the UTF-8 bytes of the namespace (as the
 * server names it: "" is "kv"), the byte 0x1F, and the UTF-8 bytes of the
 * key, as an unsigned number, modulo the number of shards
 * (docs/contract.md has test vectors).
 */
export function keyShard(namespace: string, key: string, count: number): number {
  if (count === 1) return 0;
  room(prefixBytes(namespace) + Buffer.byteLength(key, "utf8"));
  let at = writePrefix(namespace);
  at += hashInput.write(key, at, "utf8");
  return (hashKey(hashInput, 0, at, 0, hashView) >>> 0) % count;
}

/**
 * keyShards is keyShard of every key of a call: the namespace is encoded
 * once, and keys that arrived as bytes (a decoded request's KeyList) are
 * hashed from those bytes, with no string made or encoded again.
 */
export function keyShards(namespace: string, keys: Keys, count: number): number[] {
  const shards = new Array<number>(keys.length).fill(0);
  if (count === 1) return shards;
  if (!(keys instanceof KeyList)) {
    for (let i = 0; i < keys.length; i++) shards[i] = keyShard(namespace, keys[i]!, count);
    return shards;
  }
  const prefix = prefixBytes(namespace);
  const bytes = keys.bytes;
  for (let i = 0; i < keys.length; i++) {
    const start = keys.starts[i]!;
    const end = keys.ends[i]!;
    if (room(prefix + end - start) || i === 0) writePrefix(namespace);
    // A loop: Buffer.copy's argument checks cost more than moving a key of tens of bytes.
    let at = prefix;
    for (let b = start; b < end; b++) hashInput[at++] = bytes[b]!;
    shards[i] = (hashKey(hashInput, 0, at, 0, hashView) >>> 0) % count;
  }
  return shards;
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
