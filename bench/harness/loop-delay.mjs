// Preloaded into a server by bench/probes/maximal-calls.ts and bench/probes/overload-burst.ts: on SIGTERM, prints the event loop's worst and
// p99 delay as one JSON line on stderr; SIGUSR2 starts the count again (after a warm-up).
import { monitorEventLoopDelay } from "node:perf_hooks";

const delay = monitorEventLoopDelay({ resolution: 5 });
delay.enable();
process.on("SIGUSR2", () => delay.reset());
process.on("SIGTERM", () => {
  console.error(JSON.stringify({ loopMaxMs: Math.round(delay.max / 1e6), loopP99Ms: Math.round(delay.percentile(99) / 1e6) }));
});
