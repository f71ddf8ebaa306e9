import { invalidArgument, limitExceeded, MetadataError, Reason } from "./errors.js";
import { KeyList, type Keys, keyListOf } from "./key-list.js";
import { namespaceProblem } from "./namespace-name.js";
import { DEFAULT_NAMESPACE, type StateOptions } from "./state-options.js";

/** CallLimits are the options a request's own checks read: what one call may carry. */
export type CallLimits = Pick<StateOptions, "maxKeysPerCall" | "maxKeyBytes">;

/** MAX_UINT32 is the largest rank, world size or page count a request can carry. */
const MAX_UINT32 = 2 ** 32 - 1;

/** INT32 is the range of a page index a request can carry. */
const INT32 = { min: -(2 ** 31), max: 2 ** 31 - 1 };

/** namespaceName resolves a request's namespace: empty means DEFAULT_NAMESPACE. */
export function namespaceName(name: string, options: CallLimits): string {
  if (name === "") return DEFAULT_NAMESPACE;
  const problem = namespaceProblem(name, options.maxKeyBytes);
  if (problem !== undefined) throw invalidArgument("namespace", problem);
  return name;
}

/** checkUint32 checks that a number field holds an unsigned 32-bit integer. */
export function checkUint32(value: number, field: string): void {
  if (!Number.isInteger(value) || value < 0 || value > MAX_UINT32) {
    throw invalidArgument(field, `${field} must be an integer from 0 to ${MAX_UINT32}, got ${value}`);
  }
}

/** checkInt32 checks that a number field holds a signed 32-bit integer. */
export function checkInt32(value: number, field: string): void {
  if (!Number.isInteger(value) || value < INT32.min || value > INT32.max) {
    throw invalidArgument(field, `${field} must be an integer from ${INT32.min} to ${INT32.max}, got ${value}`);
  }
}

/**
 * keyListFor checks a batch of keys and gives it as a KeyList: every key is
 * a non-empty string of at most maxKeyBytes UTF-8 bytes, counted on the
 * bytes, whether they came from a codec (which checked their UTF-8) or are
 * strings encoded here.
 */
export function keyListFor(keys: Keys, field: string, options: CallLimits, emptyAllowed = false): KeyList {
  checkCount(keys, field, options);
  const what = emptyAllowed ? "a string" : "a non-empty string";
  if (!(keys instanceof KeyList)) {
    for (let i = 0; i < keys.length; i++) {
      if (typeof keys[i] !== "string") throw invalidArgument(field, `${field}[${i}] must be ${what}`);
    }
  }
  const list = keys instanceof KeyList ? keys : keyListOf(keys);
  const maxBytes = options.maxKeyBytes;
  for (let i = 0; i < list.length; i++) {
    const bytes = list.byteLength(i);
    if (bytes === 0 && !emptyAllowed) throw invalidArgument(field, `${field}[${i}] must be ${what}`);
    // Named by its bytes, not its position: a call split between shards checks each part alone (its ErrorInfo's key names it).
    if (bytes > maxBytes)
      throw limitExceeded(field, `${field} holds a key of ${bytes} bytes, more than the limit of ${maxBytes}`, { key: list.key(i).slice(0, 64) });
  }
  return list;
}

/**
 * checkPrefixes checks the prefix keys of a batch and gives them as a
 * KeyList: as many as the keys, each a key (within the limits) or empty
 * (the key is a root), and none the key itself (a key cannot come before
 * itself in a prefix match).
 */
export function checkPrefixes(keys: KeyList, prefixKeys: Keys, options: CallLimits): KeyList {
  checkSameLength(keys, "keys", prefixKeys, "prefix_keys");
  const prefixes = keyListFor(prefixKeys, "prefix_keys", options, true);
  for (let i = 0; i < keys.length; i++) {
    if (prefixes.byteLength(i) > 0 && prefixes.equals(i, keys, i)) {
      throw invalidArgument("prefix_keys", `prefix_keys[${i}] is keys[${i}] itself; a key's prefix key is the key before it (empty for the first)`, {
        key: keys.key(i).slice(0, 64),
      });
    }
  }
  return prefixes;
}

/** checkCount checks that a batch field has at most maxKeysPerCall entries. */
export function checkCount(values: { length: number }, field: string, options: CallLimits): void {
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
      // Named by its value, not its position: a call split between shards checks each part alone.
      throw new MetadataError(Reason.PAGE_OUT_OF_RANGE, `${field} holds ${page}, not a page of rank ${subject.rank} (0 .. ${numPages - 1})`, {
        ...subject,
        page: Number.isInteger(page) ? page : undefined,
        field,
      });
    }
  }
}

/**
 * keysCall checks what a call on keys says on its own, before any state is
 * read: its namespace and its keys. A node checks it there; a router
 * checks it before it splits the call between shards, so that its errors
 * are a node's and name the caller's positions.
 */
export function keysCall(namespace: string, keys: Keys, options: CallLimits): { name: string; keys: KeyList } {
  return { name: namespaceName(namespace, options), keys: keyListFor(keys, "keys", options) };
}

/** allocateCall checks what a BatchAllocate says on its own (keysCall): its keys, and its prefix keys when it names any. */
export function allocateCall(namespace: string, keys: Keys, prefixKeys: Keys, options: CallLimits): { name: string; keys: KeyList; prefixes?: KeyList } {
  const call = keysCall(namespace, keys, options);
  return prefixKeys.length > 0 ? { ...call, prefixes: checkPrefixes(call.keys, prefixKeys, options) } : call;
}

/** confirmCall checks what a ConfirmWrite says on its own (keysCall): its keys and pages paired, its releases and their keys paired. */
export function confirmCall(
  namespace: string,
  keys: Keys,
  pages: readonly number[],
  pagesToRelease: readonly number[],
  keysToRelease: Keys,
  options: CallLimits,
): { name: string; keys: KeyList; releasing?: KeyList } {
  const call = keysCall(namespace, keys, options);
  checkSameLength(call.keys, "keys", pages, "pages");
  checkCount(pagesToRelease, "pages_to_release", options);
  if (keysToRelease.length === 0) return call;
  const releasing = keyListFor(keysToRelease, "keys_to_release", options);
  checkSameLength(releasing, "keys_to_release", pagesToRelease, "pages_to_release");
  return { ...call, releasing };
}
