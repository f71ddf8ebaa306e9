import { KeyScope } from "../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { RANK_SEPARATOR } from "./namespace-name.js";

export { KeyScope };

/**
 * rankScopedName is the internal name of one rank of a namespace of
 * KEY_SCOPE_RANK: each rank is a namespace of its own inside (its keys,
 * lists, leases and TTLs), under that name in the journal, the store and the log.
 */
export function rankScopedName(name: string, rank: number): string {
  return `${name}${RANK_SEPARATOR}${rank}`;
}

/** parseRankScoped reads an internal name back: the namespace and its rank, or undefined for a namespace of KEY_SCOPE_NAMESPACE. */
export function parseRankScoped(internal: string): { name: string; rank: number } | undefined {
  const at = internal.lastIndexOf(RANK_SEPARATOR);
  if (at < 0) return undefined;
  return { name: internal.slice(0, at), rank: Number(internal.slice(at + 1)) };
}
