import { afterEach } from "vitest";
import { MetadataState } from "../../src/core/state.js";
import type { StateOptions } from "../../src/core/state-options.js";
import { createLogger, type Logger } from "../../src/server/logger.js";
import { type RunningServer, type ServerConfig, startServer } from "../../src/server/server.js";
import { MemoryStore } from "../../src/store/memory-store.js";
import type { Store } from "../../src/store/store.js";
import { FakeClock } from "./fake-clock.js";

export interface TestServer extends RunningServer {
  state: MetadataState;
  store: Store;
  time: FakeClock;
}

const running = new Set<RunningServer>();

afterEach(async () => {
  await Promise.all([...running].map((s) => s.close()));
  running.clear();
});

/** startTestServer runs an in-process server on 127.0.0.1 and an ephemeral port, stopped after the test. */
export async function startTestServer(
  options: Partial<StateOptions> = {},
  store: Store = new MemoryStore(),
  port = 0,
  config: Partial<ServerConfig> = {},
  logger: Logger = createLogger("silent"),
): Promise<TestServer> {
  const time = new FakeClock();
  const state = new MetadataState(time.clock, options);
  const server = await startServer({ state, store }, { host: "127.0.0.1", port, maxBodyBytes: 1 << 20, shutdownTimeoutMs: 2_000, ...config }, logger);
  running.add(server);
  return { ...server, close: server.close, state, store, time };
}

/** freePort returns a loopback port that was free a moment ago. */
export async function freePort(): Promise<number> {
  const { createServer } = await import("node:net");
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
  const { port } = probe.address() as { port: number };
  await new Promise((resolve) => probe.close(resolve));
  return port;
}
