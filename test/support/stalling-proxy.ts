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
  /** pingsHeld counts the PING frames (not their answers) held since the stall on those connections that hold a call. */
  pingsHeld(): number;
}

const closers = new Set<() => void>();

afterEach(() => {
  for (const close of closers) close();
  closers.clear();
});

/** PREFACE_BYTES is the length of an HTTP/2 client's connection preface, which precedes its frames. */
const PREFACE_BYTES = 24;

/** HEADERS, PING: the types of those HTTP/2 frames; ACK, the flag of a PING's answer. */
const HEADERS = 0x1;
const PING = 0x6;
const ACK = 0x1;

/** stallingProxy listens on 127.0.0.1 and an ephemeral port in front of `target` (http://host:port); closed after the test. */
export async function stallingProxy(target: string): Promise<StallingProxy> {
  const { hostname, port } = new URL(target);
  const ends = new Set<net.Socket>();
  const held: (() => void)[] = [];
  let stalled = false;
  let stallCount = 0;
  /** heldOn counts, per connection (closed ones too), the calls and PINGs held since the stall on those opened before it. */
  const heldOn: { calls: number; pings: number }[] = [];
  const server = net.createServer((inbound) => {
    const outbound = net.connect(Number(port), hostname);
    const opened = stallCount;
    const counts = { calls: 0, pings: 0 };
    heldOn.push(counts);
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
        if (stalled && opened < stallCount) {
          if (pending[3] === HEADERS) counts.calls++;
          if (pending[3] === PING && (pending[4]! & ACK) === 0) counts.pings++;
        }
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
      for (const counts of heldOn) {
        counts.calls = 0;
        counts.pings = 0;
      }
    },
    resume() {
      stalled = false;
      for (const write of held.splice(0)) write();
    },
    callsHeld: () => heldOn.reduce((sum, counts) => sum + counts.calls, 0),
    pingsHeld: () => heldOn.reduce((sum, counts) => sum + (counts.calls > 0 ? counts.pings : 0), 0),
  };
}
