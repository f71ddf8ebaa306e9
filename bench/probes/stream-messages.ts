// stream-messages.ts [--seconds=S] [--rounds=R] [--bytes=N] [--concurrency=C]: what a message costs a node:http2 server
// as a unary call (a stream of its own: headers, data, trailers) against as one message on a stream kept open (data
// only), the floor under any scheme that sends a relay's Batches to a shard on one long-lived stream instead of one
// call each. A bare server in a child process answers each request of N bytes (5,000: a part of 64 keys) with a
// fixed answer of 300 bytes; C (4) loops in this process call it one way, then the other, alternated R (3) times,
// S (3) seconds a row. Prints the server's and the client's CPU per message (from /proc and process.cpuUsage).
// Run: node --import tsx bench/probes/stream-messages.ts
import { spawn } from "node:child_process";
import * as http2 from "node:http2";
import { createInterface } from "node:readline";
import { grpcFrame } from "../harness/lean-grpc.js";
import { numberOption } from "../harness/options.js";
import { cpuMs } from "../harness/processes.js";

const ANSWER = grpcFrame(new Uint8Array(300).fill(7));

/** serve is the bare server: /unary answers each call, /stream answers each whole gRPC message on the open stream in order. */
function serve(): void {
  const server = http2.createServer({ settings: { initialWindowSize: 1 << 20 } });
  server.on("connection", (socket: import("node:net").Socket) => socket.setNoDelay(true));
  server.on("stream", (stream, headers) => {
    if (headers[":path"] === "/unary") {
      const chunks: Buffer[] = [];
      stream.on("data", (chunk: Buffer) => chunks.push(chunk));
      stream.on("end", () => {
        Buffer.concat(chunks); // the request joined, as a real server does, and not read
        stream.respond({ ":status": 200, "content-type": "application/grpc+proto" }, { waitForTrailers: true });
        stream.on("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
        stream.end(ANSWER);
      });
      return;
    }
    stream.respond({ ":status": 200, "content-type": "application/grpc+proto" });
    let pending: Buffer = Buffer.alloc(0);
    stream.on("data", (chunk: Buffer) => {
      pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
      while (pending.length >= 5 && pending.length >= 5 + pending.readUInt32BE(1)) {
        pending = pending.subarray(5 + pending.readUInt32BE(1));
        stream.write(ANSWER);
      }
    });
    stream.on("end", () => stream.end());
  });
  server.listen(0, "127.0.0.1", () => console.log(JSON.stringify({ port: (server.address() as { port: number }).port })));
}

if (process.argv[2] === "serve") serve();
else await probe();

async function probe(): Promise<void> {
  const seconds = numberOption("seconds", 3);
  const rounds = numberOption("rounds", 3);
  const bytes = numberOption("bytes", 5_000);
  const concurrency = numberOption("concurrency", 4);
  const child = spawn(process.execPath, ["--import", "tsx", new URL(import.meta.url).pathname, "serve"], { stdio: ["ignore", "pipe", "inherit"] });
  const port = await new Promise<number>((resolve) => createInterface({ input: child.stdout! }).once("line", (line) => resolve(JSON.parse(line).port)));
  const session = http2.connect(`http://127.0.0.1:${port}`);
  const request = grpcFrame(new Uint8Array(bytes).fill(1));
  const headers = { ":method": "POST", "content-type": "application/grpc+proto", te: "trailers" };

  const unary = () =>
    new Promise<void>((resolve, reject) => {
      const stream = session.request({ ...headers, ":path": "/unary" });
      stream.on("data", () => undefined);
      stream.on("end", resolve);
      stream.on("error", reject);
      stream.end(request);
    });

  // One stream, its answers in the order of its messages: each waiting message resolves with the next whole answer.
  const open = session.request({ ...headers, ":path": "/stream" });
  const waiting: (() => void)[] = [];
  let received = 0;
  open.on("data", (chunk: Buffer) => {
    received += chunk.length;
    for (; received >= ANSWER.length; received -= ANSWER.length) waiting.shift()!();
  });
  const streamed = () =>
    new Promise<void>((resolve) => {
      waiting.push(resolve);
      open.write(request);
    });

  const row = async (send: () => Promise<void>) => {
    const server0 = cpuMs(child.pid!);
    const client0 = process.cpuUsage();
    const end = performance.now() + seconds * 1_000;
    let messages = 0;
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (performance.now() < end) {
          await send();
          messages++;
        }
      }),
    );
    const client = process.cpuUsage(client0);
    return { messages, serverUs: ((cpuMs(child.pid!) - server0) * 1_000) / messages, clientUs: (client.user + client.system) / messages };
  };

  await row(unary); // warm-up of both, not counted
  await row(streamed);
  for (let round = 1; round <= rounds; round++) {
    for (const [name, send] of round % 2 === 1
      ? ([
          ["unary", unary],
          ["stream", streamed],
        ] as const)
      : ([
          ["stream", streamed],
          ["unary", unary],
        ] as const)) {
      const r = await row(send);
      console.log(
        `round ${round} ${name.padEnd(6)}: ${Math.round(r.messages / seconds)} messages/s, server ${r.serverUs.toFixed(1)} µs, client ${r.clientUs.toFixed(1)} µs CPU per message`,
      );
    }
  }
  await new Promise((resolve) => {
    open.once("close", resolve);
    open.end();
  });
  await new Promise<void>((resolve) => session.close(() => resolve()));
  child.kill("SIGTERM");
}
