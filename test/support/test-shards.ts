import { type Client, createClient, type Interceptor } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { MetadataService } from "../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { MetadataError } from "../../src/client/metadata-error.js";
import type { StateOptions } from "../../src/core/state-options.js";
import { SHARD_LOCAL_HEADER } from "../../src/protocol/headers.js";
import { topologyOf } from "../../src/service/cluster-service.js";
import type { MetadataCalls } from "../../src/service/metadata-calls.js";
import { startTestServer, type TestServer } from "./test-server.js";

/** alone marks a call as one shard's leader sends another its part: answered there, not routed again. */
export const alone: Interceptor = (next) => (req) => {
  req.header.set(SHARD_LOCAL_HEADER, "1");
  return next(req);
};

/** callsOf are MetadataCalls over gRPC through `client`; an error is the client's MetadataError, with the server's reason. */
export function callsOf(client: Client<typeof MetadataService>): MetadataCalls {
  return (async (method, request, signal) => {
    try {
      return { response: await (client[method] as (r: unknown, o: object) => Promise<unknown>)(request, { signal }) };
    } catch (error) {
      throw MetadataError.of(error);
    }
  }) as MetadataCalls;
}

/**
 * startTestShards runs `count` shards as in-process servers over the
 * network, each routing the keys of the others to them (as a member routes
 * to the other shards' leaders, marked shard-local), each on a fake clock
 * of its own and stopped after the test.
 */
export async function startTestShards(count: number, options: Partial<StateOptions> = {}): Promise<TestServer[]> {
  const urls: string[] = [];
  // A server asks for its ways to the others as it starts, before they listen: each is made at its first call.
  const peer = (shard: number): MetadataCalls => {
    let calls: MetadataCalls | undefined;
    return ((method, request, signal) => {
      calls ??= callsOf(createClient(MetadataService, createGrpcTransport({ baseUrl: urls[shard]!, interceptors: [alone] })));
      return calls(method, request, signal);
    }) as MetadataCalls;
  };
  const servers: TestServer[] = [];
  for (let shard = 0; shard < count; shard++) {
    const topology = () =>
      topologyOf(
        { count, index: shard },
        urls.map((url, i) => [{ id: `m${i}`, url, leader: true }]),
      );
    const server = await startTestServer({ ...options, shards: count, shard }, undefined, 0, { peers: { calls: peer, topology, close: () => undefined } });
    urls.push(server.url);
    servers.push(server);
  }
  return servers;
}
