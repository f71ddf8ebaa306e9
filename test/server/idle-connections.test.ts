import * as net from "node:net";
import { describe, expect, it } from "vitest";
import { startChildServer } from "../support/child-server.js";
import { lacking } from "../support/debian-packages.js";
import { engines } from "../support/engine-clients.js";

const missing = lacking("the idle connection tests", "requests");

/** idleClose sends one call on a fresh HTTP/1.1 connection and resolves with its Keep-Alive header and the ms from its answer to the server's close. */
function idleClose(port: number): Promise<{ keepAlive: string; closedAfterMs: number }> {
  return new Promise((resolve, reject) => {
    const body = JSON.stringify({ keys: ["a"] });
    const socket = net.connect(port, "127.0.0.1", () =>
      socket.write(`POST /keys/batch_exists HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`),
    );
    let answer = "";
    let answeredAt = 0;
    socket.on("data", (chunk: Buffer) => {
      answer += chunk.toString();
      answeredAt = performance.now();
    });
    socket.on("error", reject);
    socket.on("end", () => resolve({ keepAlive: /^keep-alive: (.*)$/im.exec(answer)?.[1]?.trim() ?? "", closedAfterMs: performance.now() - answeredAt }));
  });
}

describe("an HTTP/1.1 connection idle for --idle-timeout", () => {
  it("is closed by the server a second later, the Keep-Alive header having told the client the timeout", async () => {
    const server = await startChildServer(["--in-memory", "--idle-timeout", "1s"]);
    const { keepAlive, closedAfterMs } = await idleClose(Number(new URL(server.url).port));
    expect(keepAlive).toBe("timeout=1");
    // Node's HTTP server closes an idle keep-alive connection 1 s after the timeout it advertises, so that a client that
    // honours the header never sends on a connection being closed; the engines' clients do not honour it.
    expect(closedAfterMs).toBeGreaterThan(1_500);
    expect(closedAfterMs).toBeLessThan(5_000);
  });
});

/** connectionsTaken is what the server's /metrics says of the connections it took, the scrape's own included. */
async function connectionsTaken(url: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`, { headers: { connection: "close" } })).text();
  return Number(/^hf3fs_metadata_connections_total (\d+)$/m.exec(text)?.[1]);
}

/**
 * An engine's reader idles between its turns on its own keep-alive
 * connection (vLLM's scheduler between requests, SGLang's prefetcher), and
 * its client ignores the Keep-Alive header. Idle 2.5 s against
 * --idle-timeout 1s, each of its turns after the first finds the
 * connection closed by the server (above) half a second before: urllib3
 * must see that and connect again (or, if the close crosses its call,
 * retry the call, as both connectors' retry policy allows for POST),
 * without the engine seeing an error.
 */
for (const [engine, start] of engines(2.5)) {
  describe.skipIf(missing !== "")(`${engine}, its reader idle past the server's close of its connection,`, () => {
    it("sees no error, and keeps every key", async () => {
      const server = await startChildServer(["--in-memory", "--idle-timeout", "1s"]);
      const before = await connectionsTaken(server.url);
      const run = await start(server.url);
      for (let turn = 0; turn < 4; turn++) await run.progress(5);
      const result = await run.stop();
      const connections = (await connectionsTaken(server.url)) - before - 1; // the scrape's own
      console.log(
        `${engine} with --idle-timeout 1s: ${result.calls} calls (the longest ${result.longestCall}), ${result.stored} keys stored, ${connections} connections`,
      );
      expect(result.errors).toEqual([]);
      // Without the closes, 4: each process's connection (and vLLM's initialization's); each reader made at least 4 turns, 3 after its first.
      expect(connections).toBeGreaterThanOrEqual(7);
      expect(await result.missing(server.url)).toEqual([]);
      expect(result.stored).toBeGreaterThanOrEqual(20);
    }, 60_000);
  });
}
