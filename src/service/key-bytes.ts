import { KeyList } from "../core/key-list.js";
import type { Keys } from "../core/state.js";

/** KeyField is a repeated string field of a request that may come as bytes. */
export type KeyField = "keys" | "prefixKeys";

/** KEY_LISTS is internal: where a codec leaves a message's key fields as KeyLists. */
const KEY_LISTS = Symbol("hf3fs.metadata.keyLists");

type WithKeyLists = { [KEY_LISTS]?: Partial<Record<KeyField, KeyList>> };

/**
 * attachKeyList gives a decoded message a key field as a KeyList over the
 * request's bytes, for the core (keysOf), and as strings made on its first
 * read, for everyone else: the message stays equal to what protobuf-es decodes.
 */
export function attachKeyList(message: object, field: KeyField, starts: number[], ends: number[], bytes: Buffer): void {
  const list = new KeyList(bytes, starts, ends);
  let strings: string[] | undefined;
  Object.defineProperty(message, field, { enumerable: true, configurable: true, get: () => (strings ??= list.toStrings()) });
  let lists = (message as WithKeyLists)[KEY_LISTS];
  if (lists === undefined) {
    lists = {};
    Object.defineProperty(message, KEY_LISTS, { value: lists, enumerable: false });
  }
  lists[field] = list;
}

/** keysOf is a key field of a request: its KeyList when a codec left one, else its strings. */
export function keysOf<M extends Partial<Record<KeyField, string[]>>>(message: M, field: KeyField): Keys {
  return (message as WithKeyLists)[KEY_LISTS]?.[field] ?? message[field] ?? [];
}

/** isKeyList tells whether keys came as bytes (tests). */
export function isKeyList(keys: Keys): keys is KeyList {
  return keys instanceof KeyList;
}
