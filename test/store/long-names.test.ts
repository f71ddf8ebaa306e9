import { describe, expect, it } from "vitest";
import { assertInvariants } from "../../bench/harness/invariants.js";
import { MetadataState } from "../../src/core/state.js";
import { LmdbStore } from "../../src/store/lmdb-store.js";
import { FakeClock } from "../support/fake-clock.js";
import { tempDir } from "../support/temp-dir.js";

/** name makes a string of exactly `bytes` UTF-8 bytes from a repeated character of 1, 2, 3 or 4 bytes (plus ASCII padding). */
function name(bytes: number, char: string): string {
  const width = Buffer.byteLength(char);
  return char.repeat(Math.floor(bytes / width)) + "x".repeat(bytes % width);
}

const SIZES = [1, 500, 1_000, 1_024];
const CHARS = ["k", "é", "鍵", "🔑"];

describe("names at the limits", () => {
  it("store and load whole, for every size of namespace and key up to 1,024 bytes", async () => {
    const dir = tempDir();
    const time = new FakeClock();
    let store = await LmdbStore.open(dir);
    let state = new MetadataState(time.clock, {});
    const confirmed: [string, string, number][] = [];
    for (const nsBytes of SIZES) {
      const namespace = name(nsBytes, CHARS[nsBytes % CHARS.length]!);
      state.initializeRank(namespace, 0, 1_000, 1);
      // One call mixing a short key with every long one, as in the crash that half-applied a batch.
      const keys = ["short", ...SIZES.flatMap((bytes) => CHARS.map((char) => name(bytes, char)))].filter((k, i, all) => all.indexOf(k) === i);
      for (const key of keys) expect(Buffer.byteLength(key)).toBeLessThanOrEqual(1_024);
      const { pages } = state.batchAllocate(namespace, 0, keys);
      state.confirmWrite(namespace, 0, keys, pages);
      await store.commit(state.takeChanges());
      for (const [i, key] of keys.entries()) confirmed.push([namespace, key, pages[i]!]);
    }
    await store.close();

    store = await LmdbStore.open(dir);
    state = new MetadataState(time.clock, {});
    state.restore(store.stored());
    assertInvariants(state);
    for (const [namespace, key, page] of confirmed) expect(state.getLocations(namespace, 0, [key])).toEqual([page]);
    // Forgetting a long key removes its record too.
    const [namespace, key] = confirmed.at(-1)!;
    state.deleteKeys(namespace, [key]);
    await store.commit(state.takeChanges());
    await store.close();
    store = await LmdbStore.open(dir);
    state = new MetadataState(time.clock, {});
    state.restore(store.stored());
    expect(state.batchExists(namespace, [key])).toEqual([false]);
    await store.close();
  });
});
