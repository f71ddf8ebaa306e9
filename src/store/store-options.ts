import { type OptionsOf, optionTable } from "../core/option-table.js";

/** STORE_OPTIONS choose where the state is kept. */
export const STORE_OPTIONS = optionTable({
  dataDir: { flag: "data-dir", kind: "string", default: "./data", help: "directory of the durable store" },
  inMemory: { flag: "in-memory", kind: "boolean", default: false, help: "keep state in memory only (lost on exit)" },
});

/** StoreOptions choose where the state is kept (STORE_OPTIONS). */
export type StoreOptions = OptionsOf<typeof STORE_OPTIONS>;
