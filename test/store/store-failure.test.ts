import { Code, ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { ErrorInfoSchema, Reason } from "../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { createMetadataClient } from "../../src/client/index.js";
import { MetadataState } from "../../src/core/state.js";
import { LmdbStore } from "../../src/store/lmdb-store.js";
import { startChildServer } from "../support/child-server.js";
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

describe("a full disk", () => {
  it("fails the call in flight UNAVAILABLE/STORE_UNAVAILABLE, exits 1, and loses nothing acknowledged", async () => {
    const dir = tempDir();
    // A file size limit of 2 MB makes the store's writes fail as on a full disk (EFBIG), without privileges.
    const server = await startChildServer(["--data-dir", dir], {}, ["prlimit", "--fsize=2000000"]);
    const client = createMetadataClient({ baseUrl: server.url, retry: { deadlineMs: 0 } });
    await client.initializeRank({ rank: 0, numPages: 100_000, worldSize: 1 });
    const acknowledged: string[] = [];
    let failure: Promise<unknown> | undefined;
    for (let i = 0; failure === undefined && i < 1_000; i++) {
      const keys = Array.from({ length: 100 }, (_, j) => `key-${i}-${j}`.padEnd(200, "x"));
      try {
        await client.confirmWrite({ rank: 0, keys, pages: (await client.batchAllocate({ rank: 0, keys })).pages });
        acknowledged.push(...keys);
      } catch (error) {
        failure = Promise.reject(error);
      }
    }
    expect(acknowledged.length).toBeGreaterThan(0);
    expect(await reasonOf(failure!)).toEqual({ code: Code.Unavailable, reason: Reason.STORE_UNAVAILABLE });
    expect(await server.exited).toBe(1);
    expect(server.stderr).not.toMatch(/Unhandled|unhandled/);

    const restarted = await startChildServer(["--data-dir", dir]);
    const again = createMetadataClient({ baseUrl: restarted.url, retry: { deadlineMs: 0 } });
    const exists = [];
    for (let i = 0; i < acknowledged.length; i += 1_000) exists.push(...(await again.batchExists({ keys: acknowledged.slice(i, i + 1_000) })).exists);
    expect(exists.every((e) => e)).toBe(true);
    restarted.child.kill("SIGTERM");
    expect(await restarted.exited).toBe(0);
  });
});
