import { invalidArgument } from "../../core/index.js";
import { tooManyEntries } from "../message-entries.js";

/** JsonObject is a parsed request body. */
export type JsonObject = Record<string, unknown>;

const strictUtf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/**
 * parseJsonObject parses a request body as a JSON object; an empty body is
 * {}. Invalid UTF-8 is refused, not replaced by U+FFFD, so that two
 * different byte strings never become one key (gRPC refuses them too). A
 * body of more than maxValues values is refused before it is parsed.
 */
export function parseJsonObject(bytes: Buffer, maxValues: number): JsonObject {
  if (bytes.length === 0) return {};
  checkJsonValues(bytes, maxValues);
  let text: string;
  try {
    text = strictUtf8.decode(bytes);
  } catch {
    throw invalidArgument("body", "request body is not valid UTF-8");
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (e) {
    throw invalidArgument("body", `request body is not JSON: ${(e as Error).message}`);
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) throw invalidArgument("body", "request body must be a JSON object");
  return parsed as JsonObject;
}

/**
 * checkJsonValues throws LIMIT_EXCEEDED when a JSON text has more than
 * maxValues values (as countJsonValues counts them). Why by hand: JSON.parse
 * has no limit, and a 60 MiB body of `{}` took it 20 s and 1.9 GB; this scan
 * allocates nothing and skips strings with indexOf. Malformed JSON is left
 * to JSON.parse.
 */
export function checkJsonValues(bytes: Uint8Array, maxValues: number): void {
  // Every value past the first takes a byte of its own (a comma or an opening bracket): a shorter text needs no count.
  if (bytes.length < maxValues) return;
  if (countJsonValues(bytes, maxValues) > maxValues) throw tooManyEntries(maxValues);
}

/**
 * countJsonValues counts the values of a JSON text as 1 + its commas and
 * opening brackets outside strings: the values, plus one per empty array
 * or object. It stops counting past `stopAfter`.
 */
export function countJsonValues(bytes: Uint8Array, stopAfter: number): number {
  let values = 1;
  for (let i = 0; i < bytes.length && values <= stopAfter; i++) {
    const byte = bytes[i]!;
    if (byte === 0x22) i = closingQuote(bytes, i);
    else if (byte === 0x2c || byte === 0x5b || byte === 0x7b) values++;
  }
  return values;
}

/** closingQuote is the index of the quote that ends the string opened at `open`: the next quote after an even run of backslashes (the end when none). */
function closingQuote(bytes: Uint8Array, open: number): number {
  let quote = open;
  for (;;) {
    quote = bytes.indexOf(0x22, quote + 1);
    if (quote < 0) return bytes.length;
    let backslashes = 0;
    while (bytes[quote - 1 - backslashes] === 0x5c) backslashes++;
    if (backslashes % 2 === 0) return quote;
  }
}

/**
 * These read the fields of a JSON body and throw INVALID_ARGUMENT naming
 * the field when it is missing or of the wrong type, so that a malformed
 * body never reaches the core.
 */

/** int reads an integer field; `fallback` when absent (required when undefined). */
export function int(body: JsonObject, field: string, fallback?: number): number {
  const value = body[field] ?? fallback;
  if (typeof value !== "number" || !Number.isInteger(value)) throw invalidArgument(field, `"${field}" must be an integer`);
  return value;
}

/** str reads a string field; `fallback` when absent. */
export function str(body: JsonObject, field: string, fallback: string): string {
  const value = body[field] ?? fallback;
  if (!isString(value)) throw invalidArgument(field, `"${field}" must be a string of Unicode text`);
  return value;
}

/** optionalStr reads an optional string field; undefined when absent. */
export function optionalStr(body: JsonObject, field: string): string | undefined {
  return body[field] === undefined ? undefined : str(body, field, "");
}

/** bool reads an optional boolean field; false when absent. */
export function bool(body: JsonObject, field: string): boolean {
  const value = body[field] ?? false;
  if (typeof value !== "boolean") throw invalidArgument(field, `"${field}" must be true or false`);
  return value;
}

/** namespaceField reads the optional "namespace" of a body; "" when absent, which the core reads as its default namespace. */
export function namespaceField(body: JsonObject): string {
  return str(body, "namespace", "");
}

/** strings reads an array of strings; `[]` when absent and optional. */
export function strings(body: JsonObject, field: string, optional = false): string[] {
  const value = body[field] ?? (optional ? [] : undefined);
  if (!Array.isArray(value) || !value.every(isString)) {
    throw invalidArgument(field, `"${field}" must be an array of strings of Unicode text`);
  }
  return value as string[];
}

/** ints reads an array of integers; `[]` when absent and optional. */
export function ints(body: JsonObject, field: string, optional = false): number[] {
  const value = body[field] ?? (optional ? [] : undefined);
  if (!Array.isArray(value) || !value.every((v) => typeof v === "number" && Number.isInteger(v))) {
    throw invalidArgument(field, `"${field}" must be an array of integers`);
  }
  return value as number[];
}

/** pairs reads an array of [first, second] pairs into two columns, checking each element with `isFirst` and `isSecond`. */
export function pairs<A, B>(body: JsonObject, field: string, isFirst: (v: unknown) => v is A, isSecond: (v: unknown) => v is B, shape: string): [A[], B[]] {
  const value = body[field];
  if (!Array.isArray(value)) throw invalidArgument(field, `"${field}" must be an array of ${shape}`);
  const firsts = new Array<A>(value.length);
  const seconds = new Array<B>(value.length);
  for (let i = 0; i < value.length; i++) {
    const pair = value[i] as unknown;
    if (!Array.isArray(pair) || pair.length !== 2 || !isFirst(pair[0]) || !isSecond(pair[1])) {
      throw invalidArgument(field, `"${field}"[${i}] must be ${shape}`);
    }
    firsts[i] = pair[0];
    seconds[i] = pair[1];
  }
  return [firsts, seconds];
}

/**
 * isString accepts a string of Unicode text: a lone surrogate ("\ud800",
 * which JSON can escape but UTF-8, and so gRPC, cannot carry) is refused.
 */
export const isString = (v: unknown): v is string => typeof v === "string" && v.isWellFormed();
export const isInt = (v: unknown): v is number => typeof v === "number" && Number.isInteger(v);
/** isPrefix accepts a prefix key: a string, or null for none. */
export const isPrefix = (v: unknown): v is string | null => v === null || isString(v);

/**
 * confirmFields are the fields of a confirm_write body of either dialect:
 * the [key, page] pairs of `field` (vLLM's "confirmations", SGLang's
 * "written_keys_to_confirm") and the optional releases.
 */
export function confirmFields(body: JsonObject, field: string): { keys: string[]; pages: number[]; pagesToRelease: number[]; keysToRelease: string[] } {
  const [keys, pages] = pairs(body, field, isString, isInt, "[key, page]");
  return { keys, pages, pagesToRelease: ints(body, "pages_to_release", true), keysToRelease: strings(body, "keys_to_release", true) };
}
