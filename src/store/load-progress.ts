import type { LoadProgress } from "./lmdb-store.js";

/** ProgressFields are what a log line of a long load says: how far (records of total, percent), how fast, and how long is left. */
export interface ProgressFields {
  records: number;
  total: number;
  percent: number;
  recordsPerSecond: number;
  /** secondsLeft is null until the load has a rate. */
  secondsLeft: number | null;
}

/** progressFields turns a load's progress into the fields of its log line: the store's load, a standby's snapshot and state. */
export function progressFields({ records, total, elapsedMs }: LoadProgress): ProgressFields {
  const recordsPerSecond = Math.round((records / Math.max(elapsedMs, 1)) * 1_000);
  const percent = total > 0 ? Math.min(100, Math.floor((records / total) * 100)) : 0;
  const secondsLeft = recordsPerSecond > 0 ? Math.max(0, Math.ceil((total - records) / recordsPerSecond)) : null;
  return { records, total, percent, recordsPerSecond, secondsLeft };
}
