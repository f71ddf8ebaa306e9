import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import { describe, expect, it } from "vitest";
import { MetadataService } from "../../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { keyShard } from "../../../src/core/shards.js";
import { singleNodeTopology } from "../../../src/service/cluster-service.js";
import type { MetadataCalls } from "../../../src/service/metadata-calls.js";
import { startTestServer } from "../../support/test-server.js";

/**
 * aShardThatHangs is a member of shard 0 whose way to shard 1 never
 * answers: it gives the signals its calls to shard 1 were sent with.
 */
async function aShardThatHangs() {
  const signals: (AbortSignal | undefined)[] = [];
  const hangs = (async (_method, _request, signal) => {
    signals.push(signal);
    return new Promise((_, reject) => signal?.addEventListener("abort", () => reject(signal.reason)));
  }) as MetadataCalls;
  const server = await startTestServer({ shards: 2, shard: 0 }, undefined, 0, {
    peers: { calls: () => hangs, topology: () => singleNodeTopology({ count: 2, index: 0 }, ""), close: () => undefined },
  });
  return { server, signals };
}

const KEY_OF_SHARD_1 = Array.from({ length: 50 }, (_, i) => `k${i}`).find((key) => keyShard("kv", key, 2) === 1)!;

describe("a member's call to another shard ends with its caller's deadline", () => {
  it.each([
    ["gRPC (the fast path)", (url: string) => createGrpcTransport({ baseUrl: url })],
    ["Connect (connect-node)", (url: string) => createConnectTransport({ baseUrl: url, httpVersion: "1.1" })],
  ])("%s", async (_, transport) => {
    const { server, signals } = await aShardThatHangs();
    const client = createClient(MetadataService, transport(server.url));
    const answer = await client.batchExists({ keys: [KEY_OF_SHARD_1] }, { timeoutMs: 300 }).catch((e: unknown) => ConnectError.from(e));
    expect((answer as ConnectError).code).toBe(Code.DeadlineExceeded);
    expect(signals).toHaveLength(1);
    // The part sent to shard 1 is given up too, not held to the member's own --startup-hold.
    await new Promise<void>((resolve) => (signals[0]!.aborted ? resolve() : signals[0]!.addEventListener("abort", () => resolve())));
    expect(signals[0]!.aborted).toBe(true);
  });
});
