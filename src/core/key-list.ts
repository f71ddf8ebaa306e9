import { hashKey, KEY_HASH_SEED, sameBytes, viewOf } from "./key-table.js";

/**
 * KeyList is the keys of one call as UTF-8 bytes, where they lie: key i is
 * bytes[starts[i] .. ends[i]). The gRPC codecs make one over the request's
 * own buffer, so the registry hashes and compares keys without a string per
 * key; a string is made only where one is needed (the journal, an error).
 * Callers with strings (the JSON routes, protobuf-es messages, tests) get
 * one from keyListOf, which encodes them once.
 */
export class KeyList {
  /** hashCache holds every key's hashKey, computed on the first ask: a call hashes each key once, whatever it looks up. */
  #hashCache: Int32Array | undefined;
  #view: DataView | undefined;

  constructor(
    readonly bytes: Buffer,
    private readonly keyStarts: number[] = [],
    private readonly keyEnds: number[] = [],
    /** strings are the keys as strings when the caller had them. */
    private readonly strings?: readonly string[],
  ) {}

  get starts(): readonly number[] {
    return this.keyStarts;
  }

  get ends(): readonly number[] {
    return this.keyEnds;
  }

  /** add appends the key at bytes[start .. end); a codec adds every key before the list is used. */
  add(start: number, end: number): void {
    this.keyStarts.push(start);
    this.keyEnds.push(end);
  }

  get length(): number {
    return this.starts.length;
  }

  /** byteLength is the length of key i in bytes. */
  byteLength(i: number): number {
    return this.ends[i]! - this.starts[i]!;
  }

  /** view is a DataView of the bytes, made once: the registry reads keys four bytes per step. */
  get view(): DataView {
    this.#view ??= viewOf(this.bytes);
    return this.#view;
  }

  /** hash is hashKey of key i: from hashes() once that ran, else of this key alone (a caller that looks up a few keys of a list). */
  hash(i: number): number {
    return this.#hashCache?.[i] ?? hashKey(this.bytes, this.keyStarts[i]!, this.keyEnds[i]!, KEY_HASH_SEED, this.view);
  }

  /** equals tells whether key i of this list has the same bytes as key j of `other`. */
  equals(i: number, other: KeyList, j: number): boolean {
    const length = this.byteLength(i);
    return length === other.byteLength(j) && sameBytes(this.view, this.keyStarts[i]!, other.view, other.starts[j]!, length);
  }

  /** hashes is hashKey of every key, by position. */
  hashes(): Int32Array {
    if (this.#hashCache === undefined) {
      this.#hashCache = new Int32Array(this.length);
      for (let i = 0; i < this.length; i++) this.#hashCache[i] = hashKey(this.bytes, this.keyStarts[i]!, this.keyEnds[i]!, KEY_HASH_SEED, this.view);
    }
    return this.#hashCache;
  }

  /** key is key i as a string (the bytes are valid UTF-8: a codec checked them, or an encoder wrote them). */
  key(i: number): string {
    return this.strings?.[i] ?? this.bytes.toString("utf8", this.starts[i], this.ends[i]);
  }

  /** pick is the list of the keys at `positions`, over the same bytes (a shard's part of a call's keys). */
  pick(positions: readonly number[]): KeyList {
    const starts = positions.map((i) => this.keyStarts[i]!);
    const ends = positions.map((i) => this.keyEnds[i]!);
    return new KeyList(this.bytes, starts, ends, this.strings === undefined ? undefined : positions.map((i) => this.strings![i]!));
  }

  /** toStrings is every key as a string. */
  toStrings(): string[] {
    return Array.from({ length: this.length }, (_, i) => this.key(i));
  }
}

/** Keys are the keys of a call: bytes from a codec, or strings. */
export type Keys = KeyList | readonly string[];

/**
 * keyListOf encodes strings (already checked to be strings) as a KeyList. A
 * lone surrogate becomes U+FFFD, as every UTF-8 encoder writes it. Keys all
 * of ASCII (what engines send: hex digests) are encoded in one call, their
 * joined text, where each key's byte length is its string length; any other
 * list, or one of more than JOINED_CHARS characters (whose joined copy would
 * be a large string for a moment, or longer than a string may be), is
 * encoded key by key.
 */
export function keyListOf(keys: readonly string[]): KeyList {
  let chars = 0;
  for (const key of keys) chars += key.length;
  if (chars <= JOINED_CHARS) {
    const joined = keys.join("");
    const ascii = Buffer.from(joined, "utf8");
    if (ascii.length === chars) return new KeyList(ascii, ...asciiSpans(keys), keys);
  }
  let size = 0;
  for (const key of keys) size += Buffer.byteLength(key, "utf8");
  const bytes = Buffer.allocUnsafe(size);
  const starts = new Array<number>(keys.length);
  const ends = new Array<number>(keys.length);
  let at = 0;
  for (let i = 0; i < keys.length; i++) {
    starts[i] = at;
    at += bytes.write(keys[i]!, at, "utf8");
    ends[i] = at;
  }
  return new KeyList(bytes, starts, ends, keys);
}

const JOINED_CHARS = 1 << 24;

/** asciiSpans are the byte ranges of keys of ASCII laid end to end: a key's bytes are as many as its characters. */
function asciiSpans(keys: readonly string[]): [number[], number[]] {
  const starts = new Array<number>(keys.length);
  const ends = new Array<number>(keys.length);
  let at = 0;
  for (let i = 0; i < keys.length; i++) {
    starts[i] = at;
    at += keys[i]!.length;
    ends[i] = at;
  }
  return [starts, ends];
}
