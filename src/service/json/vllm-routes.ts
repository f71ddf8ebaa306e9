import { KeyScope, Role } from "../../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { invalidArgument } from "../../core/errors.js";
import { int, ints, isInt, isPrefix, isString, namespaceField, pairs, str, strings } from "./json-body.js";
import { type JsonRoute, NO_CONTENT } from "./json-route.js";

/**
 * vllmRoutes are the routes of vLLM's HF3FS KV connector metadata server,
 * whose namespaces have `worldSize` ranks (--vllm-world-size; a body's
 * `world_size` overrides it). With 0 (vLLM sends none), a key is complete
 * when confirmed on every rank initialized so far, and an admin drops a
 * rank that should not count (POST /rank/{rank}/drop). Namespace "kv"
 * unless the body names one.
 */
export function vllmRoutes(worldSize: number): JsonRoute[] {
  return [
    {
      name: "vllm.initialize",
      pattern: /^\/rank\/(\d+)\/initialize$/,
      handle(state, body, [rank]) {
        const role = str(body, "role", "worker");
        if (role !== "worker" && role !== "scheduler") throw invalidArgument("role", `"role" must be "worker" or "scheduler", got "${role}"`);
        const numPages = role === "worker" ? int(body, "num_pages") : 0;
        const declared = int(body, "world_size", worldSize);
        const result = state.initializeRank(
          namespaceField(body),
          Number(rank),
          numPages,
          declared,
          role === "worker" ? Role.WORKER : Role.SCHEDULER,
          KeyScope.NAMESPACE,
        );
        const message =
          role === "scheduler"
            ? `scheduler of rank ${rank} registered`
            : `rank ${rank} ${result.created ? "initialized" : "already initialized"} with ${numPages} pages`;
        return { status: 200, body: { message } };
      },
    },
    {
      name: "vllm.batch_allocate",
      pattern: /^\/keys\/batch_allocate$/,
      handle(state, body) {
        const rank = int(body, "rank");
        const [keys, prefixes] = pairs(body, "keys", isString, isPrefix, "[key, prefix_key]");
        const { pages } = state.batchAllocate(
          namespaceField(body),
          rank,
          keys,
          prefixes.map((p) => p ?? ""),
        );
        return { status: 200, body: { rank, results: keys.map((key, i) => [key, pages[i]]) } };
      },
    },
    {
      name: "vllm.confirm_write",
      pattern: /^\/keys\/confirm_write$/,
      handle(state, body) {
        const [keys, pages] = pairs(body, "confirmations", isString, isInt, "[key, page]");
        state.confirmWrite(namespaceField(body), int(body, "rank"), keys, pages, ints(body, "pages_to_release", true), strings(body, "keys_to_release", true));
        return NO_CONTENT;
      },
    },
    {
      name: "vllm.batch_exists",
      pattern: /^\/keys\/batch_exists$/,
      handle(state, body) {
        return { status: 200, body: { exists: state.batchExists(namespaceField(body), strings(body, "keys")) } };
      },
    },
    {
      name: "vllm.get_locations",
      pattern: /^\/keys\/get_locations$/,
      handle(state, body) {
        const pages = state.getLocations(namespaceField(body), int(body, "rank"), strings(body, "keys"));
        return { status: 200, body: { locations: pages.map((p) => (p < 0 ? null : p)) } };
      },
    },
    {
      name: "vllm.clear",
      pattern: /^\/clear$/,
      handle(state) {
        state.clear(undefined);
        return NO_CONTENT;
      },
    },
    {
      name: "vllm.drop_rank",
      pattern: /^\/rank\/(\d+)\/drop$/,
      handle(state, body, [rank]) {
        return { status: 200, body: { forgotten_keys: state.dropRank(namespaceField(body), Number(rank)) } };
      },
    },
  ];
}
