import { type Logger, pino } from "pino";
import { type OptionsOf, optionTable } from "../core/options.js";

export type { Logger };

/** LOG_OPTIONS choose what the server logs. */
export const LOG_OPTIONS = optionTable({
  logLevel: {
    kind: "string",
    choices: ["fatal", "error", "warn", "info", "debug", "trace", "silent"],
    default: "info",
  },
});

/** LogOptions choose what the server logs (LOG_OPTIONS). */
export type LogOptions = OptionsOf<typeof LOG_OPTIONS>;

/** createLogger writes one JSON line per event to stdout, its time in ISO 8601 (UTC). */
export function createLogger(level: string): Logger {
  return pino({ level, base: { service: "hf3fs-metadata" }, timestamp: pino.stdTimeFunctions.isoTime });
}
