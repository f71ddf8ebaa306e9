import { once } from "node:events";
import { describe, expect, it } from "vitest";
import { LeanSession } from "../../src/client/lean-session.js";
import { startChildServer } from "../support/child-server.js";

describe("a lean session", () => {
  it("closes a connection whose PING goes unanswered (the server stopped), and opens a new one at its next use", async () => {
    const server = await startChildServer(["--in-memory"]);
    await server.logged("ready"); // from "listening" until then the port only holds connections: nothing answers a PING
    const session = new LeanSession(server.url, undefined, 200);
    const first = session.open();
    await once(first, "connect");
    await new Promise((resolve) => setTimeout(resolve, 500)); // PINGs answered: the connection stays
    expect(first.closed || first.destroyed).toBe(false);
    server.child.kill("SIGSTOP");
    try {
      const started = performance.now();
      await new Promise((resolve) => first.once("close", resolve)); // (events.once would reject at its error)
      console.log(`closed ${Math.round(performance.now() - started)} ms after the server stopped (PINGs every 200 ms)`);
      expect(session.open()).not.toBe(first);
    } finally {
      server.child.kill("SIGCONT");
    }
    session.close();
  });
});
