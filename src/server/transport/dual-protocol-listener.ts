import * as http from "node:http";
import * as http2 from "node:http2";
import * as net from "node:net";

/** RequestHandler serves a request of either HTTP version through Node's compatibility API. */
export type RequestHandler = (
  req: http.IncomingMessage | http2.Http2ServerRequest,
  res: http.ServerResponse | http2.Http2ServerResponse,
) => void;

/** The HTTP/2 client preface starts with these bytes; no HTTP/1.1 method does. */
const H2_PREFACE = Buffer.from("PRI * HTTP/2.0");

/**
 * DualProtocolListener serves cleartext HTTP/1.1 and HTTP/2 (h2c with prior
 * knowledge, as gRPC clients speak it) on one port. Node's cleartext http2
 * server speaks only HTTP/2, so it reads the first bytes of each connection
 * and hands the socket to an http2 or an http server accordingly.
 */
export class DualProtocolListener {
  readonly h1: http.Server;
  readonly h2: http2.Http2Server;
  private readonly tcp: net.Server;
  private readonly sockets = new Set<net.Socket>();
  private readonly sessions = new Set<http2.ServerHttp2Session>();
  /** h1InFlight counts the requests in flight per HTTP/1.1 connection. */
  private readonly h1InFlight = new Map<net.Socket, number>();
  private closing = false;

  constructor(handler: RequestHandler) {
    this.h1 = http.createServer({ keepAliveTimeout: 60_000 }, handler);
    this.h1.on("request", (req: http.IncomingMessage, res: http.ServerResponse) => this.trackH1(req.socket, res));
    // Flow-control windows of 1 MiB per stream and 16 MiB per connection: with
    // the 64 KiB defaults, concurrent batch requests of tens of KiB wait on
    // WINDOW_UPDATE round trips.
    this.h2 = http2.createServer({ settings: { maxConcurrentStreams: 1_000, initialWindowSize: 1 << 20 } }, handler);
    this.h2.on("session", (session) => {
      session.once("connect", () => session.setLocalWindowSize(16 << 20));
      if (!session.connecting) session.setLocalWindowSize(16 << 20);
      this.sessions.add(session);
      session.once("close", () => this.sessions.delete(session));
    });
    this.tcp = net.createServer({ noDelay: true }, (socket) => this.route(socket));
  }

  /** listen binds host:port (0 for any free port) and returns the bound port. */
  listen(host: string, port: number): Promise<number> {
    return new Promise((resolve, reject) => {
      this.tcp.once("error", reject);
      this.tcp.listen(port, host, () => {
        this.tcp.off("error", reject);
        resolve((this.tcp.address() as net.AddressInfo).port);
      });
    });
  }

  /**
   * close stops accepting connections, sends GOAWAY to every HTTP/2 session
   * and closes idle HTTP/1.1 connections, then waits up to timeoutMs for
   * calls in flight before destroying what is left.
   */
  async close(timeoutMs: number): Promise<void> {
    this.closing = true;
    const stopped = new Promise<void>((resolve) => this.tcp.close(() => resolve()));
    for (const session of this.sessions) session.close();
    for (const [socket, inFlight] of this.h1InFlight) if (inFlight === 0) socket.end();
    const deadline = Date.now() + timeoutMs;
    while (this.sockets.size > 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
    for (const session of this.sessions) session.destroy();
    for (const socket of this.sockets) socket.destroy();
    await stopped;
  }

  /** trackH1 counts a request in flight on an HTTP/1.1 connection, which closes after its last answer once closing. */
  private trackH1(socket: net.Socket, res: http.ServerResponse): void {
    this.h1InFlight.set(socket, (this.h1InFlight.get(socket) ?? 0) + 1);
    if (this.closing) res.shouldKeepAlive = false;
    res.once("close", () => {
      const left = this.h1InFlight.get(socket)! - 1;
      this.h1InFlight.set(socket, left);
      if (this.closing && left === 0) socket.end();
    });
  }

  private route(socket: net.Socket): void {
    this.sockets.add(socket);
    socket.once("close", () => this.sockets.delete(socket));
    socket.on("error", () => socket.destroy());
    let head = Buffer.alloc(0);
    const sniff = () => {
      let chunk: Buffer | null;
      while ((chunk = socket.read() as Buffer | null) !== null) head = Buffer.concat([head, chunk]);
      const n = Math.min(head.length, H2_PREFACE.length);
      const isH2 = head.subarray(0, n).equals(H2_PREFACE.subarray(0, n));
      if (isH2 && n < H2_PREFACE.length) return; // need more bytes to decide
      socket.off("readable", sniff);
      socket.unshift(head);
      if (!isH2) {
        this.h1InFlight.set(socket, 0);
        socket.once("close", () => this.h1InFlight.delete(socket));
      }
      (isH2 ? this.h2 : this.h1).emit("connection", socket);
    };
    socket.on("readable", sniff);
  }
}
