import { type OptionsOf, optionTable } from "../core/index.js";

/** STORE_OPTIONS choose where the state is kept. */
export const STORE_OPTIONS = optionTable({
  dataDir: { flag: "data-dir", kind: "string", default: "./data", help: "directory of the durable store" },
  inMemory: { flag: "in-memory", kind: "boolean", default: false, help: "keep state in memory only (lost on exit)" },
  lockWaitMs: {
    flag: "lock-wait",
    kind: "duration",
    default: 30_000,
    help: "how long to wait for another process to release the data dir (a restart's previous one, still draining); calls wait at the port meanwhile; 0: refuse at once",
  },
});

/** StoreOptions choose where the state is kept (STORE_OPTIONS). */
export type StoreOptions = OptionsOf<typeof STORE_OPTIONS>;
