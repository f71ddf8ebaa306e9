import { KeyScope, Role } from "../../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { invalidArgument } from "../../core/index.js";
import {
  namespaceField as bodyNamespace,
  bool,
  confirmFields,
  int,
  isPrefix,
  isString,
  type JsonObject,
  optionalStr,
  pairs,
  str,
  strings,
} from "./json-body.js";
import { type JsonRoute, jsonRoute, NO_CONTENT } from "./json-route.js";

/**
 * vllmRoutes are the routes of vLLM's HF3FS KV connector metadata server,
 * whose namespaces have `worldSize` ranks (--vllm-world-size; a body's
 * `world_size` overrides it). With 0 (vLLM sends none), a key is complete
 * when confirmed on every rank initialized so far, and an admin drops a
 * rank that should not count (POST /rank/{rank}/drop). The namespace is
 * the body's, else `namespace` (--vllm-namespace), else "kv"; /clear
 * clears `namespace` alone when one is set, every namespace (as vLLM's own
 * server) when not.
 */
export function vllmRoutes({ worldSize, namespace }: { worldSize: number; namespace: string }): JsonRoute[] {
  const namespaceField = (body: JsonObject) => bodyNamespace(body) || namespace;
  return [
    jsonRoute({
      name: "vllm.initialize",
      pattern: /^\/rank\/(\d+)\/initialize$/,
      method: "initializeRank",
      request(body, [rank]) {
        const role = str(body, "role", "worker");
        if (role !== "worker" && role !== "scheduler") throw invalidArgument("role", `"role" must be "worker" or "scheduler", got "${role}"`);
        return {
          namespace: namespaceField(body),
          rank: Number(rank),
          numPages: role === "worker" ? int(body, "num_pages") : 0,
          worldSize: int(body, "world_size", worldSize),
          role: role === "worker" ? Role.WORKER : Role.SCHEDULER,
          keyScope: KeyScope.NAMESPACE,
          layout: optionalStr(body, "layout"),
        };
      },
      reply(response, request) {
        const message =
          request.role === Role.SCHEDULER
            ? `scheduler of rank ${request.rank} registered`
            : response.resizedFrom > 0
              ? `rank ${request.rank} resized from ${response.resizedFrom} to ${request.numPages} pages`
              : `rank ${request.rank} ${response.created ? "initialized" : "already initialized"} with ${request.numPages} pages`;
        return { status: 200, body: { message } };
      },
    }),
    jsonRoute({
      name: "vllm.batch_allocate",
      pattern: /^\/keys\/batch_allocate$/,
      method: "batchAllocate",
      request(body) {
        const [keys, prefixes] = pairs(body, "keys", isString, isPrefix, "[key, prefix_key]");
        return { namespace: namespaceField(body), rank: int(body, "rank"), keys, prefixKeys: prefixes.map((p) => p ?? "") };
      },
      reply({ pages }, { rank, keys }) {
        return { status: 200, body: { rank, results: keys.map((key, i) => [key, pages[i]]) } };
      },
    }),
    jsonRoute({
      name: "vllm.confirm_write",
      pattern: /^\/keys\/confirm_write$/,
      method: "confirmWrite",
      request: (body) => ({ namespace: namespaceField(body), rank: int(body, "rank"), ...confirmFields(body, "confirmations") }),
      reply: () => NO_CONTENT,
    }),
    jsonRoute({
      name: "vllm.batch_exists",
      pattern: /^\/keys\/batch_exists$/,
      method: "batchExists",
      request: (body) => ({ namespace: namespaceField(body), keys: strings(body, "keys") }),
      reply: ({ exists }) => ({ status: 200, body: { exists } }),
    }),
    jsonRoute({
      name: "vllm.get_locations",
      pattern: /^\/keys\/get_locations$/,
      method: "getLocations",
      request: (body) => ({ namespace: namespaceField(body), rank: int(body, "rank"), keys: strings(body, "keys") }),
      reply: ({ pages }) => ({ status: 200, body: { locations: pages.map((p) => (p < 0 ? null : p)) } }),
    }),
    jsonRoute({
      name: "vllm.clear",
      pattern: /^\/clear$/,
      method: "clear",
      request: () => (namespace === "" ? { allNamespaces: true } : { namespace }),
      reply: () => NO_CONTENT,
    }),
    jsonRoute({
      name: "vllm.drop_rank",
      pattern: /^\/rank\/(\d+)\/drop$/,
      method: "dropRank",
      request: (body, [rank]) => ({ namespace: namespaceField(body), rank: Number(rank) }),
      reply: ({ forgottenKeys }) => ({ status: 200, body: { forgotten_keys: forgottenKeys } }),
    }),
    jsonRoute({
      name: "vllm.reset",
      pattern: /^\/reset$/,
      method: "resetNamespace",
      request: (body) => ({ namespace: namespaceField(body), allNamespaces: bool(body, "all_namespaces"), force: bool(body, "force") }),
      reply: ({ namespaces, ranks, forgottenKeys }) => ({ status: 200, body: { namespaces, ranks, forgotten_keys: forgottenKeys } }),
    }),
  ];
}
