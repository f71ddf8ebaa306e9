import { hashKey } from "./key-table.js";

/**
 * KeyList is the keys of one call as UTF-8 bytes, where they lie: key i is
 * bytes[starts[i] .. ends[i]). The gRPC codecs make one over the request's
 * own buffer, so the registry hashes and compares keys without a string per
 * key; a string is made only where one is needed (a new record, an error).
 * Callers with strings (the JSON routes, protobuf-es messages, tests) get
 * one from keyListOf, which encodes them once.
 */
export class KeyList {
  constructor(
    readonly bytes: Buffer,
    readonly starts: readonly number[],
    readonly ends: readonly number[],
    /** strings are the keys as strings when the caller had them. */
    private readonly strings?: readonly string[],
  ) {}

  get length(): number {
    return this.starts.length;
  }

  /** byteLength is the length of key i in bytes. */
  byteLength(i: number): number {
    return this.ends[i]! - this.starts[i]!;
  }

  /** hash is hashKey of key i. */
  hash(i: number): number {
    return hashKey(this.bytes, this.starts[i]!, this.ends[i]!);
  }

  /** key is key i as a string (the bytes are valid UTF-8: a codec checked them, or an encoder wrote them). */
  key(i: number): string {
    return this.strings?.[i] ?? this.bytes.toString("utf8", this.starts[i], this.ends[i]);
  }

  /** toStrings is every key as a string. */
  toStrings(): string[] {
    return Array.from({ length: this.length }, (_, i) => this.key(i));
  }
}

/** keyListOf encodes strings (already checked to be strings) as a KeyList. A lone surrogate becomes U+FFFD, as every UTF-8 encoder writes it. */
export function keyListOf(keys: readonly string[]): KeyList {
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
