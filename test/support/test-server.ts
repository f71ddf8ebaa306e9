import { afterEach } from "vitest";
import type { StateOptions } from "../../src/core/options.js";
import { MetadataState } from "../../src/core/state.js";
import { createLogger } from "../../src/server/logger.js";
import { type RunningServer, startServer } from "../../src/server/server.js";
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
export async function startTestServer(options: Partial<StateOptions> = {}, store: Store = new MemoryStore()): Promise<TestServer> {
  const time = new FakeClock();
  const state = new MetadataState(time.clock, options);
  const server = await startServer(
    { state, store },
    { host: "127.0.0.1", port: 0, maxBodyBytes: 1 << 20, shutdownTimeoutMs: 2_000 },
    createLogger("silent"),
  );
  running.add(server);
  return { ...server, close: server.close, state, store, time };
}
