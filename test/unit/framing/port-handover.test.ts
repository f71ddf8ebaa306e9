import * as net from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { EarlyPort } from "../../../src/framing/http/early-port.js";
import { freePort } from "../../support/test-server.js";
import { until } from "../../support/until.js";

const opened: EarlyPort[] = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((port) => port.close()));
});

/** bind binds an EarlyPort on 127.0.0.1 that gives each connection's first bytes to `heard`, tagged with `name`. */
async function bind(name: string, port: number, heard: string[], waitMs = 0): Promise<EarlyPort> {
  const early = await EarlyPort.bind("127.0.0.1", port, 100, waitMs);
  opened.push(early);
  early.handTo((socket) => {
    socket.resume();
    socket.once("data", () => heard.push(name));
  });
  return early;
}

/** reaches connects to the port and writes a byte: true when a listener accepted the connection, false when it was refused. */
function reaches(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, "127.0.0.1");
    socket.once("connect", () => {
      socket.end("x");
      resolve(true);
    });
    socket.once("error", () => resolve(false));
  });
}

describe("an EarlyPort's hand-over to the process waiting for its port", () => {
  it("frees the port for the one waiting, and resolves only once it took it: no connection is refused", async () => {
    const port = await freePort();
    const heard: string[] = [];
    const old = await bind("old", port, heard);
    let waiting!: () => void;
    const waits = new Promise<void>((resolve) => (waiting = resolve));
    const next = EarlyPort.bind("127.0.0.1", port, 100, 60_000, waiting);
    await waits; // it waits as the port's successor
    expect(await reaches(port)).toBe(true); // the old one still holds the port meanwhile
    expect(await old.handOver()).toBe(true);
    // At once, no retry: the next one is bound by the time the hand-over resolves.
    expect(await reaches(port)).toBe(true);
    const taken = await next;
    opened.push(taken);
    taken.handTo((socket) => socket.once("data", () => heard.push("next")).resume());
    await until(() => heard.at(-1) === "next"); // that connection was the next one's
  });

  it("hands over nothing when no process waits: the port stays open", async () => {
    const port = await freePort();
    const old = await bind("old", port, []);
    expect(await old.handOver()).toBe(false);
    expect(await reaches(port)).toBe(true);
    const any = await bind("any", 0, []); // an ephemeral port: no one can wait for it
    expect(await any.handOver()).toBe(false);
  });
});
