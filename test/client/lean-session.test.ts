import { once } from "node:events";
import { describe, expect, it } from "vitest";
import { LeanSession } from "../../src/client/lean-session.js";
import { startChildServer } from "../support/child-server.js";
import { until } from "../support/until.js";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("a lean session", () => {
  it("closes a connection whose PING goes unanswered (the server stopped), opens a new one at its next use, and counts the server silent until it answers", async () => {
    const server = await startChildServer(["--in-memory"]);
    await server.logged("ready"); // from "listening" until then the port only holds connections: nothing answers a PING
    const session = new LeanSession(server.url, undefined, 200);
    const first = session.open();
    await once(first, "connect");
    await sleep(500); // PINGs answered: the connection stays
    expect([first.closed || first.destroyed, session.silent]).toEqual([false, false]);
    server.child.kill("SIGSTOP");
    try {
      const started = performance.now();
      await new Promise((resolve) => first.once("close", resolve)); // (events.once would reject at its error)
      console.log(`closed ${Math.round(performance.now() - started)} ms after the server stopped (PINGs every 200 ms)`);
      expect(session.silent).toBe(true);
      // The kernel accepts a connection for the stopped process: made again, it still counts as silent.
      const second = session.open();
      expect(second).not.toBe(first);
      await once(second, "connect");
      await sleep(300);
      expect(session.silent).toBe(true);
    } finally {
      server.child.kill("SIGCONT");
    }
    // Used again (as a health watch opens its stream again), it hears the server.
    await until(() => {
      session.open();
      return !session.silent;
    });
    session.close();
  });

  it("keeps a connection whose server answers the check's PING (a live standby now), and drops one at once", async () => {
    const server = await startChildServer(["--in-memory"]);
    await server.logged("ready");
    const session = new LeanSession(server.url);
    const first = session.open();
    await once(first, "connect");
    session.check(1_000);
    await sleep(1_200);
    expect(first.closed || first.destroyed).toBe(false);
    const closed = new Promise((resolve) => first.once("close", resolve));
    session.drop();
    await closed;
    expect(session.open()).not.toBe(first);
    session.close();
  });
});
