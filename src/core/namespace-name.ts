/**
 * RANK_SEPARATOR joins a namespace's name and a rank into the internal name
 * of that rank in a namespace of KEY_SCOPE_RANK (key-scope.ts). Namespace
 * names may not hold it, so no name a client gives can meet an internal one.
 */
export const RANK_SEPARATOR = "\u001f";

/** namespaceProblem is why a namespace name is not one the core takes, undefined when it is (the empty name, the default namespace, is). */
export function namespaceProblem(name: string, maxKeyBytes: number): string | undefined {
  // UTF-8 bytes as encoders write them (a lone surrogate counts as the 3 bytes of U+FFFD).
  if (typeof name !== "string" || Buffer.byteLength(name, "utf8") > maxKeyBytes) return `namespace must be a string of at most ${maxKeyBytes} bytes`;
  if (name.includes(RANK_SEPARATOR)) return "namespace must not hold U+001F (the store names each rank of a namespace of KEY_SCOPE_RANK with it)";
  return undefined;
}
