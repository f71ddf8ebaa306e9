import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { readFileSync } from "node:fs";
import * as http2 from "node:http2";
import { afterEach, describe, expect, it } from "vitest";
import { pingWithin } from "../../../src/protocol/ping-within.js";

/** answerer is a bare HTTP/2 server in a process of its own, so that it answers PINGs while this one is stalled. */
async function answerer(): Promise<{ child: ChildProcess; url: string }> {
  const script = `const s = require("node:http2").createServer(); s.listen(0, "127.0.0.1", () => console.log(s.address().port));`;
  const child = spawn(process.execPath, ["-e", script], { stdio: ["ignore", "pipe", "inherit"] });
  const [line] = (await once(child.stdout!, "data")) as [Buffer];
  return { child, url: `http://127.0.0.1:${line.toString().trim()}` };
}

/** bytesWaiting is how many bytes the kernel holds unread for the local TCP port (/proc/net/tcp's rx_queue). */
function bytesWaiting(port: number): number {
  const hex = port.toString(16).toUpperCase().padStart(4, "0");
  for (const line of readFileSync("/proc/net/tcp", "utf8").split("\n").slice(1)) {
    const fields = line.trim().split(/\s+/);
    if (fields[1]?.endsWith(`:${hex}`)) return Number.parseInt(fields[4]!.split(":")[1]!, 16);
  }
  return 0;
}

const heardOf = () => {
  let heard!: (error?: Error) => void;
  const verdict = new Promise<Error | undefined>((resolve) => (heard = resolve));
  return { heard, verdict };
};

describe("pingWithin", () => {
  let child: ChildProcess | undefined;
  let session: http2.ClientHttp2Session | undefined;
  afterEach(() => {
    session?.destroy();
    child?.kill("SIGKILL");
  });

  it("hears an answer that came while this process was stalled past the deadline: the stall is its own, not the peer's", async () => {
    const peer = await answerer();
    child = peer.child;
    session = http2.connect(peer.url);
    await once(session, "remoteSettings");
    const port = session.socket.localPort!;
    while (bytesWaiting(port) > 0) await new Promise((resolve) => setImmediate(resolve)); // read all: what waits next is the PING's answer
    const { heard, verdict } = heardOf();
    pingWithin(session, 20, heard);
    await new Promise((resolve) => setImmediate(resolve)); // node:http2 writes the PING at the end of this turn
    // A long task: the loop is held until the deadline passed and the answer (9 bytes of frame header, 8 of payload) waits in the kernel.
    const started = performance.now();
    while (performance.now() - started < 60 || bytesWaiting(port) < 17) {
      if (performance.now() - started > 10_000) throw new Error("no answer reached the socket within 10 s");
    }
    expect(await verdict).toBeUndefined();
  });

  it("gives up on a peer that does not answer (stopped) once the deadline passed", async () => {
    const peer = await answerer();
    child = peer.child;
    session = http2.connect(peer.url);
    await once(session, "connect");
    child.kill("SIGSTOP");
    const { heard, verdict } = heardOf();
    pingWithin(session, 100, heard);
    expect((await verdict)?.message).toBe("a PING not answered within 100 ms");
  });
});
