import { afterEach } from "vitest";
import { type RelayConfig, type RunningRelay, startRelay } from "../../src/relay/relay.js";
import { createLogger } from "../../src/server/logger.js";

const running = new Set<RunningRelay>();

afterEach(async () => {
  await Promise.all([...running].map((r) => r.close()));
  running.clear();
});

/** startTestRelay runs an in-process relay on 127.0.0.1 and an ephemeral port in front of `upstream`, stopped after the test. */
export async function startTestRelay(upstream: string, config: Partial<RelayConfig> = {}): Promise<RunningRelay> {
  const relay = await startRelay({ host: "127.0.0.1", port: 0, upstream, shutdownTimeoutMs: 2_000, ...config }, createLogger("silent"));
  running.add(relay);
  return relay;
}
