import type { MetadataState } from "../../core/state.js";
import type { JsonObject } from "./json-body.js";

/** JsonReply is what a route answers: a status and a JSON body (none for 204). */
export interface JsonReply {
  status: number;
  body?: unknown;
  /** headers are extra response headers (a redirect's location). */
  headers?: Record<string, string>;
}

/** JsonRoute is one POST route of a JSON dialect. */
export interface JsonRoute {
  /** name names the route in metrics, e.g. "vllm.batch_allocate". */
  name: string;
  /** pattern matches the path; its groups are the path parameters. */
  pattern: RegExp;
  /** handle runs the route on a parsed body; it throws MetadataError on bad input. The edge commits. */
  handle(state: MetadataState, body: JsonObject, params: string[]): JsonReply;
}

/** NO_CONTENT is the reply of routes that answer nothing. */
export const NO_CONTENT: JsonReply = { status: 204 };
