import { MetadataState } from "../src/core/state.js";
import { LmdbStore } from "../src/store/lmdb-store.js";
const times: number[] = [];
for (let i = 0; i < 5; i++) {
  const store = await LmdbStore.open("/tmp/w/big");
  const t = performance.now();
  const state = new MetadataState(Date.now, {});
  state.restore(store.stored());
  times.push(Math.round(performance.now() - t));
  await store.close();
}
console.log("restore ms", times.join(" "));
