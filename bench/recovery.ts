import { rmSync } from "node:fs";
import { MetadataState } from "../src/core/state.js";
import { LmdbStore } from "../src/store/lmdb-store.js";

/** fillStore writes `keys` complete keys on `ranks` ranks into a fresh store in dir, through the real state and store. */
export async function fillStore(dir: string, keys: number, ranks: number): Promise<void> {
  rmSync(dir, { recursive: true, force: true });
  const store = await LmdbStore.open(dir);
  const state = new MetadataState(Date.now, { reservationTtlMs: 3_600_000 });
  for (let r = 0; r < ranks; r++) state.initializeRank("kv", r, Math.ceil(keys * 1.1), ranks);
  const BATCH = 10_000;
  for (let done = 0; done < keys; done += BATCH) {
    const batch = Array.from({ length: Math.min(BATCH, keys - done) }, (_, i) => `${(done + i).toString(16).padStart(64, "0")}`);
    for (let r = 0; r < ranks; r++) {
      const { pages } = state.batchAllocate("kv", r, batch);
      state.confirmWrite("kv", r, batch, pages);
    }
    await store.commit(state.takeChanges());
  }
  await store.close();
}

/** measureRecovery opens dir and loads it as `serve` does; returns milliseconds and records. */
export async function measureRecovery(dir: string): Promise<{ ms: number; records: number; heapMb: number }> {
  const started = performance.now();
  const store = await LmdbStore.open(dir);
  const state = new MetadataState(Date.now, {});
  let records = 0;
  state.restore(store.stored((p) => (records = p.records)));
  const ms = performance.now() - started;
  await store.close();
  const heapMb = process.memoryUsage().heapUsed / 2 ** 20;
  return { ms, records, heapMb };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const keys = Number(process.argv[2] ?? 1_000_000);
  const dir = "/tmp/hf3fs-metadata-bench-recovery";
  const t0 = performance.now();
  await fillStore(dir, keys, 8);
  console.log(`filled ${keys} keys x 8 ranks in ${Math.round(performance.now() - t0)} ms`);
  console.log(await measureRecovery(dir));
}
