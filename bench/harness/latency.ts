/** LatencySummary are percentiles of call latencies, in milliseconds. */
export interface LatencySummary {
  count: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
}

/** summarize sorts latencies (ms) in place and reads the percentiles. */
export function summarize(latencies: number[]): LatencySummary {
  latencies.sort((a, b) => a - b);
  const at = (q: number) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? 0;
  return { count: latencies.length, p50: at(0.5), p90: at(0.9), p99: at(0.99), max: latencies[latencies.length - 1] ?? 0 };
}
