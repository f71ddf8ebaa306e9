import { describe, expect, it } from "vitest";
import { fillStore } from "../../bench/probes/recovery.js";
import { type ChildServer, startChildServer } from "../support/child-server.js";
import { lacking } from "../support/debian-packages.js";
import { VllmWorker } from "../support/engine-clients.js";
import { tempDir } from "../support/temp-dir.js";
import { freePort } from "../support/test-server.js";

const missing = lacking("the restart tests", "requests");

/** KEYS and RANKS are the store the server holds: loading it takes longer here (2-3 s) than vLLM's client retries (1.8 s). */
const KEYS = 700_000;
const RANKS = 8;
const NUM_PAGES = Math.ceil(KEYS * 1.1); // the ranks fillStore made

/** restartAfter stops a server with `signal`, waits for its exit, and starts it again on the same port and data dir, as a supervisor does. */
async function restartAfter(server: ChildServer, signal: NodeJS.Signals, args: string[]): Promise<{ server: ChildServer; exitCode: number | null }> {
  server.child.kill(signal);
  const exitCode = await server.exited;
  return { server: await startChildServer(args), exitCode };
}

describe.skipIf(missing !== "")("a vLLM client (its own retry policy) rides through restarts of a server holding 700,000 keys on 8 ranks", () => {
  it.each([
    ["SIGTERM", "SIGTERM" as const, 0],
    ["kill -9, restarted at once by a supervisor", "SIGKILL" as const, null],
  ])(
    "%s: no call fails, and no confirmed key is lost",
    async (_, signal, expectedExit) => {
      const dir = tempDir();
      await fillStore(dir, KEYS, RANKS, 0);
      const args = ["--data-dir", dir, "--port", String(await freePort())];
      let server = await startChildServer(args);
      const worker = VllmWorker.start(server.url, RANKS, NUM_PAGES, KEYS);
      await worker.progress(5);
      for (let round = 0; round < 2; round++) {
        const restarted = await restartAfter(server, signal, args);
        expect(restarted.exitCode).toBe(expectedExit);
        server = restarted.server;
        await worker.progress(5);
      }
      const summary = await worker.stop();
      console.log(`vLLM-policy worker across 2 restarts (${signal}): ${JSON.stringify({ ...summary, errors: summary.errors.length })}`);
      expect(summary.errors).toEqual([]);
      expect(summary.lost).toBe(0);
      expect(summary.confirmed).toBeGreaterThanOrEqual(15);
    },
    90_000,
  );
});
