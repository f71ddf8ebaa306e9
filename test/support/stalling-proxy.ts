import { once } from "node:events";
import * as net from "node:net";
import { afterEach } from "vitest";

/**
 * StallingProxy passes TCP connections on to a server until stalled: then
 * it holds every byte either way, as the kernel does for a server paused
 * (SIGSTOP) or cut off, until resumed.
 */
export interface StallingProxy {
  readonly url: string;
  /** stall holds every connection's bytes, those open and those to come, until resume. */
  stall(): void;
  resume(): void;
  /** callsHeld counts the HTTP/2 HEADERS frames (new streams: calls) held since the stall on connections opened before it. */
  callsHeld(): number;
}

const closers = new Set<() => void>();

afterEach(() => {
  for (const close of closers) close();
  closers.clear();
});

/** PREFACE_BYTES is the length of an HTTP/2 client's connection preface, which precedes its frames. */
const PREFACE_BYTES = 24;

/** HEADERS is the type of an HTTP/2 HEADERS frame. */
const HEADERS = 0x1;

/** stallingProxy listens on 127.0.0.1 and an ephemeral port in front of `target` (http://host:port); closed after the test. */
export async function stallingProxy(target: string): Promise<StallingProxy> {
  const { hostname, port } = new URL(target);
  const ends = new Set<net.Socket>();
  const held: (() => void)[] = [];
  let stalled = false;
  let stallCount = 0;
  let callsHeld = 0;
  const server = net.createServer((inbound) => {
    const outbound = net.connect(Number(port), hostname);
    const opened = stallCount;
    for (const end of [inbound, outbound]) {
      ends.add(end);
      end.on("error", () => undefined);
      end.on("close", () => ends.delete(end));
    }
    const pass = (to: net.Socket, chunk: Buffer) => (stalled ? held.push(() => to.write(chunk)) : to.write(chunk));
    // The client's side is read frame by frame, to count the calls a stall holds.
    let skip = PREFACE_BYTES;
    let pending = Buffer.alloc(0);
    inbound.on("data", (chunk: Buffer) => {
      pending = Buffer.concat([pending, chunk]);
      for (;;) {
        if (skip > 0) {
          const n = Math.min(skip, pending.length);
          skip -= n;
          pending = pending.subarray(n);
          if (skip > 0) break;
        }
        if (pending.length < 9) break;
        const length = pending.readUIntBE(0, 3);
        if (pending[3] === HEADERS && stalled && opened < stallCount) callsHeld++;
        skip = 9 + length;
      }
      pass(outbound, chunk);
    });
    outbound.on("data", (chunk: Buffer) => pass(inbound, chunk));
    inbound.on("close", () => outbound.destroy());
    outbound.on("close", () => inbound.destroy());
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  closers.add(() => {
    server.close();
    for (const end of ends) end.destroy();
  });
  return {
    url: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    stall() {
      stalled = true;
      stallCount++;
      callsHeld = 0;
    },
    resume() {
      stalled = false;
      for (const write of held.splice(0)) write();
    },
    callsHeld: () => callsHeld,
  };
}
