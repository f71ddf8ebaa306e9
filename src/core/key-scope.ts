import { KeyScope } from "../../gen/hf3fs/metadata/v1/metadata_pb.js";

export { KeyScope };

/**
 * RANK_SEPARATOR joins a namespace's name and a rank into the internal name
 * of that rank in a namespace of KEY_SCOPE_RANK: each rank is a namespace
 * of its own inside (its keys, lists, leases and TTLs), under that name in
 * the journal, the store and the log. Namespace names may not hold it
 * (namespaceName), so no name a client gives can meet an internal one.
 */
export const RANK_SEPARATOR = "\u001f";

/** rankScopedName is the internal name of one rank of a namespace of KEY_SCOPE_RANK. */
export function rankScopedName(name: string, rank: number): string {
  return `${name}${RANK_SEPARATOR}${rank}`;
}

/** parseRankScoped reads an internal name back: the namespace and its rank, or undefined for a namespace of KEY_SCOPE_NAMESPACE. */
export function parseRankScoped(internal: string): { name: string; rank: number } | undefined {
  const at = internal.lastIndexOf(RANK_SEPARATOR);
  if (at < 0) return undefined;
  return { name: internal.slice(0, at), rank: Number(internal.slice(at + 1)) };
}
