import { type Logger, pino } from "pino";

export type { Logger };

/** createLogger writes one JSON line per event to stdout. */
export function createLogger(level: string): Logger {
  return pino({ level, base: { service: "hf3fs-metadata" } });
}
