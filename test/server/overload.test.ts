import { ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { describe, expect, it } from "vitest";
import { ErrorInfoSchema, MetadataService, Reason } from "../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { createMetadataClient } from "../../src/client/index.js";
import { startChildServer } from "../support/child-server.js";
import { tempDir } from "../support/temp-dir.js";

describe("a burst well above capacity, with --overload-lag", () => {
  it("gets some calls shed as REASON_OVERLOADED, and loses nothing acknowledged", async () => {
    const dir = tempDir();
    const server = await startChildServer(["--data-dir", dir, "--overload-lag", "10ms"]);
    // No retries: the burst should see the refusals.
    const client = createClient(MetadataService, createGrpcTransport({ baseUrl: server.url }));
    // The rank with retries: a server just started on a busy machine may shed already.
    await createMetadataClient({ baseUrl: server.url, retry: { deadlineMs: 30_000 } }).initializeRank({ rank: 0, numPages: 1_000_000, worldSize: 1 });
    const reasons = new Map<string, number>();
    /** done holds the batches whose ConfirmWrite was acknowledged. */
    const done = new Set<number>();
    const batches = Array.from({ length: 100 }, (_, c) => Array.from({ length: 5_000 }, (_, i) => `burst-${c}-${i}`));
    const outcome = async (call: Promise<unknown>) => {
      try {
        await call;
        return true;
      } catch (e) {
        const reason = Reason[ConnectError.from(e).findDetails(ErrorInfoSchema)[0]?.reason ?? Reason.UNSPECIFIED]!;
        reasons.set(reason, (reasons.get(reason) ?? 0) + 1);
        return false;
      }
    };
    // All the allocations at once, then the confirmations of those that got pages.
    const allocations = await Promise.all(batches.map((keys) => client.batchAllocate({ rank: 0, keys }).catch((e: unknown) => e)));
    await Promise.all(
      batches.map(async (keys, c) => {
        const allocation = allocations[c];
        if (!(await outcome(allocation instanceof Error ? Promise.reject(allocation) : Promise.resolve()))) return;
        if (await outcome(client.confirmWrite({ rank: 0, keys, pages: (allocation as { pages: number[] }).pages }))) {
          done.add(c);
        }
      }),
    );
    expect([...reasons.keys()]).toEqual(["OVERLOADED"]);
    server.child.kill("SIGTERM");
    expect(await server.exited).toBe(0);

    // Restarted (without shedding): every acknowledged key is there, and the shed batches left nothing behind.
    const restarted = await startChildServer(["--data-dir", dir]);
    const again = createMetadataClient({ baseUrl: restarted.url, retry: { deadlineMs: 0 } });
    for (const [c, keys] of batches.entries()) {
      const { exists } = await again.batchExists({ keys, rank: 0 });
      expect(exists.every((e) => e === done.has(c))).toBe(true);
    }
  }, 60_000);
});
