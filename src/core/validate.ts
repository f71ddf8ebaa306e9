import { invalidArgument, limitExceeded, MetadataError, Reason } from "./errors.js";
import { KeyList, keyListOf } from "./key-list.js";
import { DEFAULT_NAMESPACE, type StateOptions } from "./options.js";

/** MAX_UINT32 is the largest rank, world size or page count a request can carry. */
const MAX_UINT32 = 2 ** 32 - 1;

/** namespaceName resolves a request's namespace: empty means DEFAULT_NAMESPACE. */
export function namespaceName(name: string, options: StateOptions): string {
  if (name === "") return DEFAULT_NAMESPACE;
  if (typeof name !== "string" || utf8Length(name) > options.maxKeyBytes) {
    throw invalidArgument("namespace", `namespace must be a string of at most ${options.maxKeyBytes} bytes`);
  }
  return name;
}

/** checkUint32 checks that a number field holds an unsigned 32-bit integer. */
export function checkUint32(value: number, field: string): void {
  if (!Number.isInteger(value) || value < 0 || value > MAX_UINT32) {
    throw invalidArgument(field, `${field} must be an integer from 0 to ${MAX_UINT32}, got ${value}`);
  }
}

/** checkKeys checks the count and the length of every key of a batch. */
function checkKeys(keys: readonly string[], field: string, options: StateOptions): void {
  checkCount(keys, field, options);
  const maxBytes = options.maxKeyBytes;
  for (let i = 0; i < keys.length; i++) {
    const key = keys[i]!;
    if (typeof key !== "string" || key.length === 0) {
      throw invalidArgument(field, `${field}[${i}] must be a non-empty string`);
    }
    // A UTF-16 unit is at most 3 UTF-8 bytes: only long keys need counting.
    if (key.length * 3 > maxBytes && utf8Length(key) > maxBytes) {
      throw limitExceeded(field, `${field}[${i}] is ${utf8Length(key)} bytes, more than the limit of ${maxBytes}`, { key: key.slice(0, 64) });
    }
  }
}

/**
 * keyListFor checks a batch of keys and gives it as a KeyList: a KeyList
 * (bytes from a codec, which checked their UTF-8) for its count and lengths, strings for their type too,
 * with the same errors either way.
 */
export function keyListFor(keys: KeyList | readonly string[], field: string, options: StateOptions): KeyList {
  if (!(keys instanceof KeyList)) {
    checkKeys(keys, field, options);
    return keyListOf(keys);
  }
  if (keys.length > options.maxKeysPerCall) {
    throw limitExceeded(field, `${field} has ${keys.length} entries, more than the limit of ${options.maxKeysPerCall} per call`);
  }
  const maxBytes = options.maxKeyBytes;
  for (let i = 0; i < keys.length; i++) {
    const bytes = keys.byteLength(i);
    if (bytes === 0) throw invalidArgument(field, `${field}[${i}] must be a non-empty string`);
    if (bytes > maxBytes) throw limitExceeded(field, `${field}[${i}] is ${bytes} bytes, more than the limit of ${maxBytes}`, { key: keys.key(i).slice(0, 64) });
  }
  return keys;
}

/** checkCount checks that a batch field has at most maxKeysPerCall entries. */
export function checkCount(values: readonly unknown[], field: string, options: StateOptions): void {
  if (values.length > options.maxKeysPerCall) {
    throw limitExceeded(field, `${field} has ${values.length} entries, more than the limit of ${options.maxKeysPerCall} per call`);
  }
}

/** checkSameLength checks that two parallel arrays have the same length. */
export function checkSameLength(a: { length: number }, aField: string, b: { length: number }, bField: string): void {
  if (a.length !== b.length) {
    throw invalidArgument(bField, `${bField} has ${b.length} entries but ${aField} has ${a.length}; they must be parallel`);
  }
}

/** checkPages checks that every page is an index of a rank of numPages pages. */
export function checkPages(pages: readonly number[], field: string, numPages: number, subject: { namespace: string; rank: number }): void {
  if (pages.length > 0 && typeof pages[0] !== "number") throw invalidArgument(field, `${field} must hold integers`);
  for (let i = 0; i < pages.length; i++) {
    const page = pages[i]!;
    if (!(page >= 0 && page < numPages && Number.isInteger(page))) {
      throw new MetadataError(Reason.PAGE_OUT_OF_RANGE, `${field}[${i}] = ${page} is not a page of rank ${subject.rank} (0 .. ${numPages - 1})`, {
        ...subject,
        page: Number.isInteger(page) ? page : undefined,
        field,
      });
    }
  }
}

/** utf8Length is the number of bytes of s in UTF-8 (a lone surrogate counts as the 3 bytes of U+FFFD, as encoders write it). */
export function utf8Length(s: string): number {
  return Buffer.byteLength(s, "utf8");
}
