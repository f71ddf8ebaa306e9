import { AllocationStatus } from "../../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { int, ints, isInt, isPrefix, isString, namespaceField, pairs, strings } from "./json-body.js";
import { type JsonRoute, NO_CONTENT } from "./json-route.js";

/**
 * sglangRoutes are the routes of SGLang's HF3FS metadata server: a per-rank
 * view, the rank in the path (404 when it is not initialized), an optional
 * "namespace" in every body.
 */
export const sglangRoutes: JsonRoute[] = [
  {
    name: "sglang.initialize",
    pattern: /^\/(\d+)\/initialize$/,
    handle(state, body, [rank]) {
      state.initializeRank(namespaceField(body), Number(rank), int(body, "num_pages"), 0);
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
      state.deleteKeys(namespaceField(body), strings(body, "keys"));
      return NO_CONTENT;
    },
  },
  {
    name: "sglang.clear",
    pattern: /^\/(\d+)\/clear$/,
    handle(state, body, [rank]) {
      state.checkRank(namespaceField(body), Number(rank));
      state.clear(namespaceField(body));
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
