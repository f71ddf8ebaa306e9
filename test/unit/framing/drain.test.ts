import * as net from "node:net";
import { describe, expect, it } from "vitest";
import { DualProtocolListener } from "../../../src/framing/http/dual-protocol-listener.js";

const LIMITS = {
  maxConnections: 100,
  maxStreamsPerConnection: 100,
  idleTimeoutMs: 60_000,
  http2KeepaliveMs: 60_000,
  requestTimeoutMs: 60_000,
  maxUnsentBytes: 1 << 20,
};

/** Connection is a raw HTTP/1.1 keep-alive connection: what it was answered so far, and whether the server reset it. */
class Connection {
  received = "";
  reset = false;
  ended = false;
  readonly socket: net.Socket;

  constructor(port: number) {
    this.socket = net.connect(port, "127.0.0.1");
    this.socket.on("data", (chunk: Buffer) => (this.received += chunk.toString()));
    this.socket.on("error", () => (this.reset = true));
    this.socket.on("end", () => (this.ended = true));
  }

  /** get writes a GET of path now (to the kernel, in this turn). */
  get(path: string): void {
    this.socket.write(`GET ${path} HTTP/1.1\r\nHost: x\r\n\r\n`);
  }

  /** answered resolves once `n` answers arrived. */
  async answered(n: number): Promise<void> {
    while ((this.received.match(/HTTP\/1\.1 200/g) ?? []).length < n && !this.reset && !this.ended) await new Promise((r) => setTimeout(r, 5));
  }
}

describe("a listener's drain (close)", () => {
  it("serves a call that reached an idle keep-alive connection as the last call in flight ended, instead of resetting it", async () => {
    let release: (() => void) | undefined;
    const listener = new DualProtocolListener((req, res) => {
      if (req.url === "/slow") release = () => res.end("slow");
      else res.end("fast");
    }, LIMITS);
    const port = await listener.listen("127.0.0.1", 0);
    const idle = new Connection(port);
    idle.get("/fast");
    await idle.answered(1);
    const busy = new Connection(port);
    busy.get("/slow");
    while (release === undefined) await new Promise((r) => setTimeout(r, 5));
    const closed = listener.close(5_000);
    await new Promise((r) => setTimeout(r, 50)); // the drain waits for /slow
    // In one turn, the idle connection's next call reaches the kernel as the last call in flight ends; then the
    // process is busy a while (a loaded machine), so that the drain looks again before its loop read the call.
    idle.get("/fast");
    release();
    const busyUntil = Date.now() + 50;
    while (Date.now() < busyUntil);
    await idle.answered(2);
    await closed;
    expect([idle.reset, (idle.received.match(/HTTP\/1\.1 200/g) ?? []).length, /connection: close/i.test(idle.received)]).toEqual([false, 2, true]);
    await busy.answered(1);
    expect(busy.received).toContain("slow");
  });
});
