import { type OptionsOf, optionTable } from "../core/options.js";

/** STORE_OPTIONS choose where the state is kept. */
export const STORE_OPTIONS = optionTable({
  dataDir: { kind: "string", default: "./data" },
  inMemory: { kind: "boolean", default: false },
  lockWaitMs: {
    kind: "duration",
    default: 30_000,
  },
});

/** StoreOptions choose where the state is kept (STORE_OPTIONS). */
export type StoreOptions = OptionsOf<typeof STORE_OPTIONS>;
