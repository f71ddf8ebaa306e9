import { afterEach } from "vitest";
import { MetadataState } from "../../src/core/state.js";
import type { StateOptions } from "../../src/core/state-options.js";
import { createLogger, type Logger } from "../../src/server/logger.js";
import { type RunningServer, type ServerParts, startServer } from "../../src/server/server.js";
import { defaultServerOptions, type ServerOptions, serverOptions } from "../../src/server/server-options.js";
import { MemoryStore } from "../../src/store/memory-store.js";
import type { Store } from "../../src/store/store.js";
import { FakeClock } from "./fake-clock.js";

/** TestServerConfig is a test server's options (the rest at their defaults) and parts, in one object. */
export type TestServerConfig = Partial<ServerOptions> & ServerParts;

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
  config: TestServerConfig = {},
  logger: Logger = createLogger("silent"),
): Promise<TestServer> {
  const time = new FakeClock();
  const state = new MetadataState(time.clock, options);
  const [given, parts] = split(config, defaultServerOptions);
  // A state split into shards is served as serve --shards S --shard K serves it.
  const part = options.shards === undefined ? {} : { shards: options.shards, shard: options.shard ?? 0 };
  const resolved = serverOptions({ host: "127.0.0.1", port, maxBodyBytes: 1 << 20, shutdownTimeoutMs: 2_000, ...part, ...given });
  const server = await startServer({ state, store }, resolved, parts, logger);
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

/** split parts a config into the options (the fields `defaults` has) and the rest. */
export function split<O extends object, P>(config: Partial<O> & P, defaults: O): [Partial<O>, P] {
  const entries = Object.entries(config);
  const isOption = ([field]: [string, unknown]) => Object.hasOwn(defaults, field);
  return [Object.fromEntries(entries.filter(isOption)) as Partial<O>, Object.fromEntries(entries.filter((e) => !isOption(e))) as P];
}
