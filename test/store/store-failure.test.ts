import { Code, ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { ErrorInfoSchema, Reason } from "../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { createMetadataClient } from "../../src/client/index.js";
import { MetadataState } from "../../src/core/state.js";
import { LmdbStore } from "../../src/store/lmdb-store.js";
import { FailingStore } from "../support/failing-store.js";
import { tempDir } from "../support/temp-dir.js";
import { startTestServer } from "../support/test-server.js";

async function reasonOf(call: Promise<unknown>) {
  const error = await call.then(
    () => undefined,
    (e: unknown) => ConnectError.from(e),
  );
  return { code: error?.code, reason: error?.findDetails(ErrorInfoSchema)[0]?.reason };
}

describe("a store that fails while serving", () => {
  it("fails the call UNAVAILABLE/STORE_UNAVAILABLE, refuses every later call, and loses nothing acknowledged", async () => {
    const dir = tempDir();
    const store = new FailingStore(await LmdbStore.open(dir));
    const server = await startTestServer({}, store);
    const client = createMetadataClient({ baseUrl: server.url, retry: { deadlineMs: 0 } });
    await client.initializeRank({ rank: 0, numPages: 8, worldSize: 1 });
    const { pages } = await client.batchAllocate({ rank: 0, keys: ["a", "b"] });
    await client.confirmWrite({ rank: 0, keys: ["a"], pages: [pages[0]!] });

    store.breakNow();
    expect(await reasonOf(client.confirmWrite({ rank: 0, keys: ["b"], pages: [pages[1]!] }))).toEqual({
      code: Code.Unavailable,
      reason: Reason.STORE_UNAVAILABLE,
    });
    await expect(server.failed).resolves.toBeInstanceOf(Error);
    expect(await reasonOf(client.batchExists({ keys: ["a"] }))).toEqual({ code: Code.Unavailable, reason: Reason.STORE_UNAVAILABLE });
    await server.close();
    await store.close();

    const reopened = await LmdbStore.open(dir);
    const state = new MetadataState(() => server.time.nowMs, {});
    state.restore(reopened.stored());
    expect(state.batchExists("", ["a", "b"])).toEqual([true, false]);
    expect(state.batchAllocate("", 0, ["b"]).pages).toEqual([pages[1]]);
    await reopened.close();
  });
});
