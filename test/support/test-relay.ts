import { afterEach } from "vitest";
import { type RelayParts, type RunningRelay, startRelay } from "../../src/relay/relay.js";
import { defaultRelayOptions, type RelayOptions, relayOptions } from "../../src/relay/relay-options.js";
import { createLogger } from "../../src/server/logger.js";
import { split } from "./test-server.js";

const running = new Set<RunningRelay>();

afterEach(async () => {
  await Promise.all([...running].map((r) => r.close()));
  running.clear();
});

/** startTestRelay runs an in-process relay on 127.0.0.1 and an ephemeral port in front of `upstream`, stopped after the test. */
export async function startTestRelay(upstream: string, config: Partial<RelayOptions> & RelayParts = {}): Promise<RunningRelay> {
  const [given, parts] = split(config, defaultRelayOptions);
  const relay = await startRelay(relayOptions({ host: "127.0.0.1", port: 0, upstream, shutdownTimeoutMs: 2_000, ...given }), parts, createLogger("silent"));
  running.add(relay);
  return relay;
}
