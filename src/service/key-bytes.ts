import { KeyList } from "../core/key-list.js";
import type { Keys } from "../core/state.js";

/** KeyField is a repeated string field of a request that may come as bytes. */
export type KeyField = "keys" | "prefixKeys";

/**
 * KeyBytesMessage is what the batch codecs decode a request into (internal
 * to the gRPC fast path): its key fields stay KeyLists over the request's
 * bytes, for the core (keysOf), and become strings only when read, for
 * everyone else. The other fields are the message's own, as protobuf-es
 * sets them. A class, so that a call costs no property definition.
 */
export class KeyBytesMessage {
  #keys: string[] | undefined;
  #prefixKeys: string[] | undefined;

  /** keyLists are the key fields as bytes; a field the request did not carry is absent. */
  readonly keyLists: Partial<Record<KeyField, KeyList>> = {};

  get keys(): string[] {
    this.#keys ??= this.keyLists.keys?.toStrings() ?? [];
    return this.#keys;
  }

  get prefixKeys(): string[] {
    this.#prefixKeys ??= this.keyLists.prefixKeys?.toStrings() ?? [];
    return this.#prefixKeys;
  }

  /** setKeys records where the values of a key field lie in the request's bytes. */
  setKeys(field: KeyField, bytes: Buffer, starts: number[], ends: number[]): void {
    if (starts.length > 0) this.keyLists[field] = new KeyList(bytes, starts, ends);
  }
}

/** keysOf is a key field of a request: its KeyList when a codec left one, else its strings. */
export function keysOf<M extends Partial<Record<KeyField, string[]>>>(message: M, field: KeyField): Keys {
  if (message instanceof KeyBytesMessage) return message.keyLists[field] ?? [];
  return message[field] ?? [];
}
