import type { MessageInitShape } from "@bufbuild/protobuf";
import type { MetadataService } from "../../../gen/hf3fs/metadata/v1/metadata_pb.js";
import type { MethodName, RequestOf, ResponseOf } from "../metadata-calls.js";
import type { JsonObject } from "./json-body.js";

/** JsonReply is what a route answers: a status and a JSON body (none for 204). */
export interface JsonReply {
  status: number;
  body?: unknown;
  /** headers are extra response headers (a redirect's location). */
  headers?: Record<string, string>;
}

/**
 * JsonRoute is one POST route of a JSON dialect, as a translation: a body
 * into one MetadataService request, that request's response into the
 * route's reply. A server runs it on its own handlers and a relay on its
 * upstream (MetadataCalls), so both answer alike.
 */
export interface JsonRoute<M extends MethodName = MethodName> {
  /** name names the route in metrics, e.g. "vllm.batch_allocate". */
  readonly name: string;
  /** pattern matches the path; its groups are the path parameters. */
  readonly pattern: RegExp;
  /** method is the MetadataService method the route calls. */
  readonly method: M;
  /** request translates a parsed body and the path parameters; it throws MetadataError on bad input. */
  request(body: JsonObject, params: string[]): MessageInitShape<(typeof MetadataService.method)[M]["input"]>;
  /** reply translates the method's response to its request. */
  reply(response: ResponseOf<M>, request: RequestOf<M>): JsonReply;
}

/** jsonRoute types a route by its method (a list of routes holds many methods). */
export function jsonRoute<M extends MethodName>(route: JsonRoute<M>): JsonRoute {
  return route as unknown as JsonRoute;
}

/** NO_CONTENT is the reply of routes that answer nothing. */
export const NO_CONTENT: JsonReply = { status: 204 };
