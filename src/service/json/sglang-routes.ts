import { AllocationStatus, KeyScope, Role } from "../../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { confirmFields, int, isPrefix, isString, namespaceField, optionalStr, pairs, strings } from "./json-body.js";
import { type JsonRoute, jsonRoute, NO_CONTENT } from "./json-route.js";

/**
 * sglangRoutes are the routes of SGLang's HF3FS metadata server: a per-rank
 * view, the rank in the path (404 when it is not initialized: the calls
 * name it as caller_rank), an optional "namespace" in every body. The
 * namespaces they create are of KEY_SCOPE_RANK, as SGLang's own server
 * keeps them: each rank keeps its own keys, and delete_keys and clear
 * touch only the rank in the path. A namespace of KEY_SCOPE_NAMESPACE (made
 * over gRPC, or stored before key scopes) keeps its scope, and delete_keys
 * and clear act on all of it.
 */
export const sglangRoutes: JsonRoute[] = [
  jsonRoute({
    name: "sglang.initialize",
    pattern: /^\/(\d+)\/initialize$/,
    method: "initializeRank",
    request: (body, [rank]) => ({
      namespace: namespaceField(body),
      rank: Number(rank),
      numPages: int(body, "num_pages"),
      role: Role.WORKER,
      newKeyScope: KeyScope.RANK,
      layout: optionalStr(body, "layout"),
    }),
    reply: () => NO_CONTENT,
  }),
  jsonRoute({
    name: "sglang.exists",
    pattern: /^\/(\d+)\/exists$/,
    method: "batchExists",
    request: (body, [rank]) => ({ namespace: namespaceField(body), keys: strings(body, "keys"), callerRank: Number(rank) }),
    reply: ({ exists }) => ({ status: 200, body: { exists } }),
  }),
  jsonRoute({
    name: "sglang.reserve_and_allocate_page_indices",
    pattern: /^\/(\d+)\/reserve_and_allocate_page_indices$/,
    method: "batchAllocate",
    request(body, [rank]) {
      const [keys, prefixes] = pairs(body, "keys", isString, isPrefix, "[key, prefix_key]");
      return { namespace: namespaceField(body), rank: Number(rank), keys, prefixKeys: prefixes.map((p) => p ?? "") };
    },
    reply: ({ pages, statuses }) => ({ status: 200, body: { indices: pages.map((page, i) => [statuses[i] === AllocationStatus.EXISTING, page]) } }),
  }),
  jsonRoute({
    name: "sglang.confirm_write",
    pattern: /^\/(\d+)\/confirm_write$/,
    method: "confirmWrite",
    request: (body, [rank]) => ({ namespace: namespaceField(body), rank: Number(rank), ...confirmFields(body, "written_keys_to_confirm") }),
    reply: () => NO_CONTENT,
  }),
  jsonRoute({
    name: "sglang.delete_keys",
    pattern: /^\/(\d+)\/delete_keys$/,
    method: "deleteKeys",
    request: (body, [rank]) => ({ namespace: namespaceField(body), keys: strings(body, "keys"), callerRank: Number(rank) }),
    reply: () => NO_CONTENT,
  }),
  jsonRoute({
    name: "sglang.clear",
    pattern: /^\/(\d+)\/clear$/,
    method: "clear",
    request: (body, [rank]) => ({ namespace: namespaceField(body), callerRank: Number(rank) }),
    reply: () => NO_CONTENT,
  }),
  jsonRoute({
    name: "sglang.get_page_indices",
    pattern: /^\/(\d+)\/get_page_indices$/,
    method: "getLocations",
    request: (body, [rank]) => ({ namespace: namespaceField(body), rank: Number(rank), keys: strings(body, "keys"), includeIncomplete: true }),
    reply: ({ pages }) => ({ status: 200, body: { indices: pages.map((p) => (p < 0 ? null : p)) } }),
  }),
];
