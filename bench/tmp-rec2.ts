import { MetadataState } from "../src/core/state.js";
import { LmdbStore } from "../src/store/lmdb-store.js";
for (let i = 0; i < 4; i++) {
  const store = await LmdbStore.open("/tmp/w/big");
  const t = performance.now();
  const state = new MetadataState(Date.now, {});
  const replay = state.replaying();
  for (const c of store.stored()) replay.apply(c);
  const t2 = performance.now();
  replay.takeOver();
  console.log("apply", Math.round(t2 - t), "takeOver", Math.round(performance.now() - t2));
  await store.close();
}
