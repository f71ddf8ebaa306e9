import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import { MetadataService } from "../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { answerHeaders } from "../protocol/headers.js";
import type { MetadataCalls, MethodName } from "./metadata-calls.js";

/**
 * callsService is MetadataCalls as connect-node serves them (a relay's
 * shards, through the router): each method makes its call, within the
 * caller's signal, and puts the id of the server that answered, if one
 * did alone, and the mark of an answer no server gave, in the response's
 * headers.
 */
export function callsService(calls: MetadataCalls): ServiceImpl<typeof MetadataService> {
  const method = (name: MethodName) => async (request: unknown, context: HandlerContext) => {
    const { response, serverId, unreached } = await calls(name, request as never, context.signal);
    for (const [header, value] of Object.entries(answerHeaders(serverId, unreached))) context.responseHeader.set(header, value);
    return response as never;
  };
  return Object.fromEntries(MetadataService.methods.map((m) => [m.localName, method(m.localName as MethodName)])) as unknown as ServiceImpl<
    typeof MetadataService
  >;
}
