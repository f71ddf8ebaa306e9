const UNIT_MS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 };

/** formatDuration writes milliseconds in the largest unit that keeps them whole, as parseDuration reads them: 60000 → "60s"... "1m". */
export function formatDuration(ms: number): string {
  for (const unit of ["h", "m", "s"] as const) if (ms >= UNIT_MS[unit]! && ms % UNIT_MS[unit]! === 0) return `${ms / UNIT_MS[unit]!}${unit}`;
  return `${ms}ms`;
}

/**
 * parseDuration reads "500ms", "60s", "10m", "1h" or "1.5s" as milliseconds.
 * A bare number is milliseconds. Throws on anything else.
 */
export function parseDuration(text: string): number {
  const match = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(text.trim());
  if (match === null) throw new Error(`"${text}" is not a duration: use e.g. 500ms, 60s, 10m, 1h`);
  return Math.round(Number(match[1]) * UNIT_MS[match[2] ?? "ms"]!);
}
