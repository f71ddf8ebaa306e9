import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { readFileSync } from "node:fs";
import { afterEach, describe, expect, it } from "vitest";
import { startChildServer } from "../support/child-server.js";

/** idlePeer is an HTTP/2 client in a process of its own that connects and then only answers what the server sends (PINGs); `port` is its end's. */
async function idlePeer(url: string): Promise<{ child: ChildProcess; port: number }> {
  const script = `const s = require("node:http2").connect(process.argv[1]); s.on("error", () => {}); s.once("remoteSettings", () => console.log(s.socket.localPort));`;
  const child = spawn(process.execPath, ["-e", script, url], { stdio: ["ignore", "pipe", "inherit"] });
  const [line] = (await once(child.stdout!, "data")) as [Buffer];
  return { child, port: Number(line.toString().trim()) };
}

/**
 * pingingPeer is an HTTP/2 client in a process of its own that PINGs every `everyMs` until it reads "stop" on stdin, and
 * prints "pinged" for each PING the server sends it.
 */
async function pingingPeer(url: string, everyMs: number): Promise<ChildProcess> {
  const script = `const s = require("node:http2").connect(process.argv[1]); s.on("error", () => {});
    s.on("ping", () => console.log("pinged"));
    s.once("remoteSettings", () => { const t = setInterval(() => s.ping(() => {}), ${everyMs}); console.log("ready");
      process.stdin.once("data", () => clearInterval(t)); });`;
  const child = spawn(process.execPath, ["-e", script, url], { stdio: ["pipe", "pipe", "inherit"] });
  await once(child.stdout!, "data");
  return child;
}

/** ESTABLISHED is /proc/net/tcp's state of an open connection. */
const ESTABLISHED = "01";

/** serverEnd is the state of the server's end of the connection from `peerPort` (/proc/net/tcp), or "" when there is none. */
function serverEnd(serverPort: number, peerPort: number): string {
  const hex = (port: number) => port.toString(16).toUpperCase().padStart(4, "0");
  for (const line of readFileSync("/proc/net/tcp", "utf8").split("\n").slice(1)) {
    const [, local, remote, state] = line.trim().split(/\s+/);
    if (local?.endsWith(`:${hex(serverPort)}`) && remote?.endsWith(`:${hex(peerPort)}`)) return state!;
  }
  return "";
}

/** closedByServer polls (up to 10 s) until the server's end of the connection is no longer open, and returns its state. */
async function closedByServer(serverPort: number, peerPort: number): Promise<string> {
  const deadline = Date.now() + 10_000;
  while (serverEnd(serverPort, peerPort) === ESTABLISHED && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
  return serverEnd(serverPort, peerPort);
}

describe("--http2-keepalive", () => {
  let peer: ChildProcess | undefined;
  afterEach(() => peer?.kill("SIGKILL"));

  // Node's session.setTimeout takes its callback once: the probe ran at a connection's first silence only, so a peer that
  // answered it and was then lost (a machine gone, a process stopped) held its connection until the idle timeout, and a
  // session Node had stopped reading (after its GOAWAY to a flood of resets) held its socket for good.
  it("pings a connection at every silence, not only its first, and closes it once its peer stops answering", async () => {
    // 1 s, not less: a peer this machine starves for longer than that would not answer in time, and be closed.
    const server = await startChildServer(["--in-memory", "--http2-keepalive", "1s"]);
    const serverPort = Number(new URL(server.url).port);
    const idle = await idlePeer(server.url);
    peer = idle.child;
    // Two silences, each pinged and answered: the connection stays.
    await new Promise((resolve) => setTimeout(resolve, 2_500));
    expect(serverEnd(serverPort, idle.port)).toBe(ESTABLISHED);
    peer.kill("SIGSTOP");
    expect(await closedByServer(serverPort, idle.port)).not.toBe(ESTABLISHED);
  });

  // An idle relay's connections carry its own PINGs: probing them too would wake every member for each of them.
  it("does not ping a peer that PINGs on its own, and pings it once it stops", async () => {
    // The peer PINGs 10 times a keepalive: a starved turn of its own does not leave the connection silent that long.
    const server = await startChildServer(["--in-memory", "--http2-keepalive", "1s"]);
    peer = await pingingPeer(server.url, 100);
    let pinged = 0;
    peer.stdout!.on("data", (chunk: Buffer) => (pinged += chunk.toString().split("pinged").length - 1));
    await new Promise((resolve) => setTimeout(resolve, 2_500));
    expect(pinged).toBe(0);
    peer.stdin!.write("stop\n");
    const deadline = Date.now() + 10_000;
    while (pinged === 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
    expect(pinged).toBeGreaterThan(0);
  });
});
