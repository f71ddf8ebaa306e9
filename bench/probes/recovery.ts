import { rmSync } from "node:fs";
import type { Change } from "../../src/core/change.js";
import { MetadataState, namespacesOf } from "../../src/core/state.js";
import { LmdbStore } from "../../src/store/lmdb-store.js";
import { benchKey } from "../harness/keys.js";

/**
 * fillStore writes `keys` complete keys, confirmed on `ranks` ranks of
 * namespace "kv" (world size `worldSize`; 0: unknown, as the vLLM routes
 * make them), into a fresh store in dir, through the store's own commit
 * path (the state machine is skipped: recovery is what is measured).
 */
export async function fillStore(dir: string, keys: number, ranks: number, worldSize = ranks): Promise<void> {
  rmSync(dir, { recursive: true, force: true });
  const store = await LmdbStore.open(dir);
  const numPages = Math.ceil(keys * 1.1);
  await store.commit(Array.from({ length: ranks }, (_, rank): Change => ({ kind: "rank", namespace: "kv", rank, numPages, worldSize })));
  const BATCH = 20_000;
  for (let done = 0; done < keys; done += BATCH) {
    const changes: Change[] = [];
    for (let i = done; i < Math.min(done + BATCH, keys); i++) {
      const pages: number[] = [];
      for (let rank = 0; rank < ranks; rank++) pages.push(rank, i);
      changes.push({ kind: "key", namespace: "kv", key: benchKey(i), parent: i % 16 === 0 ? "" : benchKey(i - 1), complete: true, pages });
    }
    await store.commit(changes);
  }
  await store.close();
}

/**
 * measureRecovery opens dir and loads it as `serve` does: milliseconds,
 * records, and the memory the state holds (after a GC when --expose-gc):
 * the heap and the ArrayBuffers, where typed arrays keep their contents.
 */
export async function measureRecovery(dir: string): Promise<{ ms: number; records: number; heapMb: number }> {
  const held = () => process.memoryUsage().heapUsed + process.memoryUsage().arrayBuffers;
  await settle();
  const heapBefore = held();
  const started = performance.now();
  const store = await LmdbStore.open(dir);
  const state = new MetadataState(Date.now, {});
  let records = 0;
  state.restore(store.stored((p) => (records = p.records)));
  const ms = performance.now() - started;
  await store.close();
  await settle();
  const heapMb = (held() - heapBefore) / 2 ** 20;
  if (namespacesOf(state).size === 0) throw new Error("nothing restored");
  return { ms, records, heapMb };
}

/** settle collects garbage (with --expose-gc) and gives V8 time to free the ArrayBuffers it found dead, which it does after the collection. */
async function settle(): Promise<void> {
  const gc = (globalThis as { gc?: () => void }).gc;
  gc?.();
  await new Promise((resolve) => setTimeout(resolve, 200));
  gc?.();
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const keys = Number(process.argv[2] ?? 1_000_000);
  const dir = "/tmp/hf3fs-metadata-bench-recovery";
  const t0 = performance.now();
  await fillStore(dir, keys, 8);
  console.log(`filled ${keys} keys x 8 ranks in ${Math.round(performance.now() - t0)} ms`);
  console.log(await measureRecovery(dir));
}
