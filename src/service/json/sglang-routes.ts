import { AllocationStatus, KeyScope, Role } from "../../../gen/hf3fs/metadata/v1/metadata_pb.js";
import type { MetadataState } from "../../core/state.js";
import { int, ints, isInt, isPrefix, isString, namespaceField, pairs, strings } from "./json-body.js";
import { type JsonRoute, NO_CONTENT } from "./json-route.js";

/**
 * sglangRoutes are the routes of SGLang's HF3FS metadata server: a per-rank
 * view, the rank in the path (404 when it is not initialized), an optional
 * "namespace" in every body. The namespaces they create are of
 * KEY_SCOPE_RANK, as SGLang's own server keeps them: each rank keeps its
 * own keys, and delete_keys and clear touch only the rank in the path. A
 * namespace of KEY_SCOPE_NAMESPACE (made over gRPC, or stored before key
 * scopes) keeps its scope, and delete_keys and clear act on all of it.
 */
export const sglangRoutes: JsonRoute[] = [
  {
    name: "sglang.initialize",
    pattern: /^\/(\d+)\/initialize$/,
    handle(state, body, [rank]) {
      state.initializeRank(namespaceField(body), Number(rank), int(body, "num_pages"), 0, Role.WORKER, scopeFor(state, namespaceField(body)));
      return NO_CONTENT;
    },
  },
  {
    name: "sglang.exists",
    pattern: /^\/(\d+)\/exists$/,
    handle(state, body, [rank]) {
      state.checkRank(namespaceField(body), Number(rank));
      return { status: 200, body: { exists: state.batchExists(namespaceField(body), strings(body, "keys"), Number(rank)) } };
    },
  },
  {
    name: "sglang.reserve_and_allocate_page_indices",
    pattern: /^\/(\d+)\/reserve_and_allocate_page_indices$/,
    handle(state, body, [rank]) {
      const [keys, prefixes] = pairs(body, "keys", isString, isPrefix, "[key, prefix_key]");
      const { pages, statuses } = state.batchAllocate(
        namespaceField(body),
        Number(rank),
        keys,
        prefixes.map((p) => p ?? ""),
      );
      return { status: 200, body: { indices: pages.map((page, i) => [statuses[i] === AllocationStatus.EXISTING, page]) } };
    },
  },
  {
    name: "sglang.confirm_write",
    pattern: /^\/(\d+)\/confirm_write$/,
    handle(state, body, [rank]) {
      const [keys, pages] = pairs(body, "written_keys_to_confirm", isString, isInt, "[key, page]");
      state.confirmWrite(namespaceField(body), Number(rank), keys, pages, ints(body, "pages_to_release", true), strings(body, "keys_to_release", true));
      return NO_CONTENT;
    },
  },
  {
    name: "sglang.delete_keys",
    pattern: /^\/(\d+)\/delete_keys$/,
    handle(state, body, [rank]) {
      state.checkRank(namespaceField(body), Number(rank));
      state.deleteKeys(namespaceField(body), strings(body, "keys"), rankFor(state, namespaceField(body), Number(rank)));
      return NO_CONTENT;
    },
  },
  {
    name: "sglang.clear",
    pattern: /^\/(\d+)\/clear$/,
    handle(state, body, [rank]) {
      state.checkRank(namespaceField(body), Number(rank));
      state.clear(namespaceField(body), rankFor(state, namespaceField(body), Number(rank)));
      return NO_CONTENT;
    },
  },
  {
    name: "sglang.get_page_indices",
    pattern: /^\/(\d+)\/get_page_indices$/,
    handle(state, body, [rank]) {
      const pages = state.getLocations(namespaceField(body), Number(rank), strings(body, "keys"), true);
      return { status: 200, body: { indices: pages.map((p) => (p < 0 ? null : p)) } };
    },
  },
];

/** scopeFor is the scope an SGLang initialize asks for: KEY_SCOPE_RANK for a new namespace, the namespace's own otherwise. */
function scopeFor(state: MetadataState, namespace: string): KeyScope {
  return state.keyScopeOf(namespace) === KeyScope.UNSPECIFIED ? KeyScope.RANK : KeyScope.UNSPECIFIED;
}

/** rankFor is the rank a delete_keys or clear acts on: the path's in a namespace of KEY_SCOPE_RANK, none (all of it) otherwise. */
function rankFor(state: MetadataState, namespace: string, rank: number): number | undefined {
  return state.keyScopeOf(namespace) === KeyScope.RANK ? rank : undefined;
}
