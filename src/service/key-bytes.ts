import { KeyList, type Keys } from "../core/index.js";

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
  readonly #bytes: Buffer;
  #keys: string[] | undefined;
  #prefixKeys: string[] | undefined;
  #keyLists: Partial<Record<KeyField, KeyList>> = {};
  #released = false;
  /** #adopted are the messages decoded from this one's bytes (a Batch's calls), released with it. */
  #adopted: KeyBytesMessage[] | undefined;

  constructor(bytes: Buffer) {
    this.#bytes = bytes;
  }

  /** keyLists are the key fields as bytes; a field the request did not carry is absent. */
  get keyLists(): Partial<Record<KeyField, KeyList>> {
    if (this.#released) throw new Error("a request's key bytes were read after its call ended");
    return this.#keyLists;
  }

  get keys(): string[] {
    this.#keys ??= this.keyLists.keys?.toStrings() ?? [];
    return this.#keys;
  }

  get prefixKeys(): string[] {
    this.#prefixKeys ??= this.keyLists.prefixKeys?.toStrings() ?? [];
    return this.#prefixKeys;
  }

  /** addKey appends to a key field the value at bytes[start .. end) of the request. */
  addKey(field: KeyField, start: number, end: number): void {
    this.#keyLists[field] ??= new KeyList(this.#bytes);
    this.#keyLists[field].add(start, end);
  }

  /**
   * release says the call is over and its request buffer may be reused
   * (body-pool.ts): from now on, reading a key field throws instead of
   * reading whatever the buffer holds next. Keys already made strings stay.
   */
  release(): void {
    this.#released = true;
    this.#keyLists = {};
    if (this.#adopted !== undefined) for (const message of this.#adopted) message.release();
  }

  /**
   * part is this request with only the keys at `positions` (of both key
   * fields when `withPrefixKeys`, else keys alone, prefixKeys as they came;
   * or `prefixKeys` given, over the request's bytes) and `fields` in place
   * of its own: a shard's share of the call, its keys still the request's
   * bytes, released with it.
   */
  part<T extends object>(this: T & KeyBytesMessage, positions: readonly number[], withPrefixKeys: boolean, fields: Partial<T> = {}, prefixKeys?: KeyList): T {
    const part = Object.assign(new KeyBytesMessage(this.#bytes), this, fields) as T & KeyBytesMessage;
    for (const field of ["keys", "prefixKeys"] as const) {
      const list = this.keyLists[field];
      if (list !== undefined) part.#keyLists[field] = field === "keys" || withPrefixKeys ? list.pick(positions) : list;
    }
    if (prefixKeys !== undefined) part.#keyLists.prefixKeys = prefixKeys;
    this.adopt(part);
    return part;
  }

  /** adopt has `message`, decoded from this one's bytes, released with it. */
  adopt(message: KeyBytesMessage): void {
    this.#adopted ??= [];
    this.#adopted.push(message);
  }
}

/** KeyBytes are a key field's keys as UTF-8 bytes where they lie: key i is bytes[starts[i] .. ends[i]) (a KeyList). */
export interface KeyBytes {
  readonly bytes: Buffer;
  readonly starts: readonly number[];
  readonly ends: readonly number[];
  readonly length: number;
}

/** keyBytesOf is a field of a message as bytes when it is a key field a codec left as bytes (an encoder copies them), else undefined. */
export function keyBytesOf(message: object, field: string): KeyBytes | undefined {
  if (!(message instanceof KeyBytesMessage) || (field !== "keys" && field !== "prefixKeys")) return undefined;
  return message.keyLists[field];
}

/** keysOf is a key field of a request: its KeyList when a codec left one, else its strings. */
export function keysOf<M extends Partial<Record<KeyField, string[]>>>(message: M, field: KeyField): Keys {
  if (message instanceof KeyBytesMessage) return message.keyLists[field] ?? [];
  return message[field] ?? [];
}
