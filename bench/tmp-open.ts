import { execFileSync } from "node:child_process";

const t0 = performance.now();
execFileSync(process.execPath, ["src/store/verify-lmdb.mjs", "/tmp/w/big", "meta", "ranks", "keys", "long_keys", "reservations", "drains"]);
console.log("verifier", Math.round(performance.now() - t0));
const { LmdbStore } = await import("../src/store/lmdb-store.js");
const t1 = performance.now();
const s = await LmdbStore.open("/tmp/w/big");
console.log("open total", Math.round(performance.now() - t1));
await s.close();
