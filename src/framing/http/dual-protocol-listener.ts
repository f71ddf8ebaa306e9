import * as http from "node:http";
import * as http2 from "node:http2";
import type * as net from "node:net";
import * as tls from "node:tls";
import { pingWithin } from "../../protocol/ping-within.js";
import type { LimitOptions } from "../../service/limit-options.js";
import { CleartextRefusal } from "./cleartext-refusal.js";
import { EarlyPort } from "./early-port.js";
import { H1Connection } from "./h1-connection.js";
import type { ListenerOptions } from "./listener-options.js";
import { UnreadAnswers } from "./unread-answers.js";

/** RequestHandler serves a request of either HTTP version through Node's compatibility API. */
export type RequestHandler = (req: http.IncomingMessage | http2.Http2ServerRequest, res: http.ServerResponse | http2.Http2ServerResponse) => void;

/** ListenerTls is the listener's certificate and key, and the CA its clients' certificates must be signed by (mTLS) if any; PEM. */
export interface ListenerTls {
  readonly cert: Buffer;
  readonly key: Buffer;
  readonly clientCa?: Buffer;
}

/**
 * ConnectionLimits bound the listener's connections (ListenerOptions, and
 * LimitOptions' requestTimeoutMs: from a connection's start, with TLS the
 * end of its handshake, itself bounded as long, to its protocol being
 * known, and HTTP/1.1's time to receive a request). An HTTP/2 session
 * silent http2KeepaliveMs is pinged, at each such silence, and destroyed
 * unless the ping is answered within as long again: Node leaves a session
 * that sent GOAWAY for a protocol error (a malformed frame, a flood of
 * resets) open, silent, and its socket in CLOSE-WAIT forever; this frees it.
 */
export type ConnectionLimits = Readonly<
  Pick<ListenerOptions, "maxConnections" | "maxStreamsPerConnection" | "idleTimeoutMs" | "http2KeepaliveMs"> &
    Pick<LimitOptions, "requestTimeoutMs" | "maxUnsentBytes">
> & {
  /** tls serves TLS (h2 and http/1.1 by ALPN); undefined: cleartext. */
  readonly tls?: ListenerTls;
};

/** ListenerCounts are what a listener counts of its connections and answers (DualProtocolListener.counts). */
export interface ListenerCounts {
  /** connections were taken since the start (after TLS, if any). */
  readonly connections: number;
  /** openConnections are open now. */
  readonly openConnections: number;
  /** unreadAnswersCancelled are the HTTP/2 answers reset since the start because their callers did not take them, by the limit: --request-timeout, --max-unsent-bytes. */
  readonly unreadAnswersCancelled: { readonly time: number; readonly bytes: number };
}

/** The HTTP/2 client preface starts with these bytes; no HTTP/1.1 method does. */
const H2_PREFACE = Buffer.from("PRI * HTTP/2.0");

/** A TLS connection's first byte: the record type of its ClientHello (handshake); no HTTP request starts with it. */
const TLS_HANDSHAKE_RECORD = 0x16;

/**
 * DualProtocolListener serves HTTP/1.1 and HTTP/2 on one port: cleartext
 * (h2c with prior knowledge, as gRPC clients speak it), or TLS offering h2
 * and http/1.1 by ALPN. It reads the first bytes of each connection (after
 * the TLS handshake) and hands the socket to an http2 or an http server
 * accordingly: Node's http2 server speaks only HTTP/2. On a TLS port it
 * reads the first byte before the handshake too, so that cleartext gets an
 * answer saying so (CleartextRefusal).
 */
export class DualProtocolListener {
  readonly h1: http.Server;
  readonly h2: http2.Http2Server;
  /** tls does the handshake of each TLS connection (undefined: cleartext); the port itself is an EarlyPort. */
  private readonly tls: tls.Server | undefined;
  /** refusal answers cleartext sent to the TLS port. */
  private readonly refusal = new CleartextRefusal();
  private port: EarlyPort | undefined;
  private readonly sockets = new Set<net.Socket>();
  /** connections counts the connections routed to the HTTP servers since the start (after TLS, if any). */
  private connections = 0;
  private readonly sessions = new Set<http2.ServerHttp2Session>();
  /** openStreams are the streams of each HTTP/2 session that are not closed. */
  private readonly openStreams = new Map<http2.ServerHttp2Session, Set<http2.ServerHttp2Stream>>();
  /**
   * unread cancels the HTTP/2 answers whose callers stopped reading, swept
   * for while calls come or answers wait (sweepSoon). HTTP/1.1 is not swept: Node
   * reads no next request on a connection until its answer is taken, so
   * each holds at most one, most often in the kernel's socket buffer, and
   * the idle timeout then ends the connection.
   */
  private readonly unread: UnreadAnswers<http2.ServerHttp2Stream>;
  /** sweeping is the timer of unread's next sweep; undefined while none is due. */
  private sweeping: NodeJS.Timeout | undefined;
  /** opened tells whether a stream opened since the last sweep. */
  private opened = false;
  /** h1Connections are the HTTP/1.1 connections, each with its answers not yet finished, told `Connection: close` when the listener closes. */
  private readonly h1Connections = new Map<net.Socket, H1Connection>();
  /** unsorted are the connections that have not yet said which protocol they speak (sniff). */
  private readonly unsorted = new Set<net.Socket>();
  private closing = false;
  /** handingOver is the socket being handed to the http2 server, while it makes that socket's session. */
  private handingOver: net.Socket | undefined;

  private readonly maxConnections: number;
  private readonly http2KeepaliveMs: number;
  private readonly requestTimeoutMs: number;
  private readonly idleTimeoutMs: number;

  constructor(handler: RequestHandler, options: ConnectionLimits) {
    this.http2KeepaliveMs = options.http2KeepaliveMs;
    this.requestTimeoutMs = options.requestTimeoutMs;
    this.idleTimeoutMs = options.idleTimeoutMs;
    this.unread = new UnreadAnswers<http2.ServerHttp2Stream>(this.requestTimeoutMs, options.maxUnsentBytes, (stream) =>
      stream.close(http2.constants.NGHTTP2_CANCEL),
    );
    const secure = options.tls;
    this.h1 = http.createServer(
      { keepAliveTimeout: this.idleTimeoutMs, headersTimeout: this.requestTimeoutMs, requestTimeout: this.requestTimeoutMs },
      handler,
    );
    // Before the handler, which may answer at once: an answer begun while closing says `Connection: close`.
    this.h1.prependListener("request", (req: http.IncomingMessage, res: http.ServerResponse) => this.trackH1(req.socket, res));
    // Flow-control windows of 1 MiB per stream and 16 MiB per connection: with
    // the 64 KiB defaults, concurrent batch requests of tens of KiB wait on
    // WINDOW_UPDATE round trips.
    this.h2 = http2.createServer({ settings: { maxConcurrentStreams: options.maxStreamsPerConnection, initialWindowSize: 1 << 20 } }, handler);
    this.h2.on("session", (session) => this.trackSession(session));
    if (secure !== undefined) {
      // A connection must finish its handshake within the request timeout, then say which protocol it speaks within as long again (route).
      this.tls = tls.createServer({ ...secureContextOptions(secure), ALPNProtocols: ["h2", "http/1.1"], handshakeTimeout: this.requestTimeoutMs }, (socket) =>
        this.route(socket),
      );
      // A failed or timed-out handshake leaves the socket of a connection handed over by the EarlyPort open: end it.
      this.tls.on("tlsClientError", (_error: Error, socket: tls.TLSSocket) => socket.destroy());
    }
    this.maxConnections = options.maxConnections;
  }

  /** reloadTls puts new certificates in place for the connections to come (SIGHUP); the open ones keep theirs. */
  reloadTls(secure: ListenerTls): void {
    if (this.tls === undefined) throw new Error("the listener was started without TLS");
    this.tls.setSecureContext(secureContextOptions(secure));
  }

  /** listen binds host:port (0 for any free port) and returns the bound port. */
  async listen(host: string, port: number): Promise<number> {
    return this.adopt(await EarlyPort.bind(host, port, this.maxConnections));
  }

  /** counts are the listener's connections (taken since the start, and open now) and the unread answers it cancelled, for /metrics. */
  counts(): ListenerCounts {
    return { connections: this.connections, openConnections: this.sockets.size, unreadAnswersCancelled: this.unread.cancelled };
  }

  /** adopt serves the connections of a port bound early (those that waited first) and returns its number. */
  adopt(port: EarlyPort): number {
    this.port = port;
    port.handTo((socket) => (this.tls === undefined ? this.route(socket) : this.beforeTls(socket, this.tls)));
    return port.port;
  }

  /**
   * close drains, then stops, as a restart needs it. It keeps the port
   * while calls are in flight, so that a client's next connection is
   * served here rather than refused while the next process cannot bind the
   * port yet (a supervisor starts it once this one exited; one started at
   * once waits for the port: EarlyPort.bind); a call held upstream through
   * a failover may take seconds, longer than an engine retries a refused
   * connection. Meanwhile every HTTP/2 session gets GOAWAY and every
   * HTTP/1.1 answer `Connection: close`, so each connection ends after its
   * calls. Once no call is in flight it stops accepting, serves the calls
   * that clients sent meanwhile (read by the next turns of the loop), and
   * closes the idle connections (an idle HTTP/1.1 connection is destroyed,
   * not half-closed: a keep-alive client keeps its side open until it next
   * uses it, and the drain would wait for that; a connection that has sent
   * nothing yet is closed too), and resolves once every connection is
   * closed; after
   * timeoutMs it stops and destroys what is left. When the next process
   * already waits for the port (a DaemonSet's surge), the port is handed
   * over to it first, and only then are the connections told to end: they
   * reconnect to a port that is taken, and the calls in flight are still
   * answered here.
   */
  async close(timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    // Until the next process took the port, the connections here go on as they were: one closed now would reconnect to no one.
    const handedOver = (await this.port?.handOver()) === true;
    this.closing = true;
    this.goAway();
    for (const { answers } of this.h1Connections.values()) for (const res of answers) if (!res.headersSent) res.shouldKeepAlive = false;
    await this.callsAnswered(handedOver, deadline);
    const stopped = this.port?.close();
    // What clients sent as the last call ended may still wait in the kernel: two turns of the loop read it (the first may
    // begin in its poll phase), and a call so found on a keep-alive connection is served and not reset with the idle ones.
    for (let turn = 0; turn < 2; turn++) await new Promise((resolve) => setImmediate(resolve));
    await this.callsAnswered(handedOver, deadline);
    this.goAway(); // the sessions opened meanwhile too
    for (const [socket, connection] of this.h1Connections) if (!connection.busy) socket.destroy();
    // A connection that has sent nothing yet holds no call (a health check's, a port probe's): the drain does not wait for it.
    for (const socket of this.unsorted) if (socket.bytesRead === 0) socket.destroy();
    while (this.sockets.size > 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
    for (const session of this.sessions) session.destroy();
    for (const socket of this.sockets) socket.destroy();
    clearTimeout(this.sweeping);
    await stopped;
  }

  /** goAway closes every HTTP/2 session (closeSession). */
  private goAway(): void {
    for (const session of this.sessions) this.closeSession(session);
  }

  /** closeSession sends a session GOAWAY, and ends it now if no stream is open (else when its last one closes). */
  private closeSession(session: http2.ServerHttp2Session): void {
    session.close();
    this.endIfIdle(session);
  }

  /** callsAnswered resolves once no call is in flight (at once when handedOver), or at the deadline. */
  private async callsAnswered(handedOver: boolean, deadline: number): Promise<void> {
    while (!handedOver && this.callsInFlight() && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
  }

  /** callsInFlight is true while an HTTP/1.1 connection has a call begun or answered, an HTTP/2 stream is open, or a connection has begun to say which protocol it speaks. */
  private callsInFlight(): boolean {
    for (const connection of this.h1Connections.values()) if (connection.busy) return true;
    for (const streams of this.openStreams.values()) if (streams.size > 0) return true;
    for (const socket of this.unsorted) if (socket.bytesRead > 0) return true;
    return false;
  }

  /**
   * trackSession sizes a new HTTP/2 session's window, follows its open
   * streams, closes it after idleTimeoutMs without one, and pings it after
   * http2KeepaliveMs of silence (probe). Node does not always end a session's
   * socket by itself once the session is closing and idle, nor after a
   * session error, so this does: a closing session ends when its last
   * stream does, and a closed session's socket is destroyed.
   */
  private trackSession(session: http2.ServerHttp2Session): void {
    const socket = this.handingOver!; // session.socket is a proxy that refuses destroy()
    session.once("connect", () => session.setLocalWindowSize(16 << 20));
    if (!session.connecting) session.setLocalWindowSize(16 << 20);
    this.sessions.add(session);
    const streams = new Set<http2.ServerHttp2Stream>();
    this.openStreams.set(session, streams);
    // A session without an open stream for idleTimeoutMs is closed (GOAWAY), then ends. One timer per session,
    // re-armed (refresh) whenever its last stream closes, and ignored while streams are open.
    const idle = setTimeout(() => {
      if (streams.size === 0) this.closeSession(session);
    }, this.idleTimeoutMs);
    idle.unref();
    session.on("stream", (stream) => {
      streams.add(stream);
      this.opened = true;
      this.sweepSoon();
      // A session opened while the server drains serves the calls it has, then ends.
      if (this.closing && !session.closed) session.close();
      stream.once("close", () => {
        streams.delete(stream);
        if (streams.size === 0 && !session.closed) idle.refresh();
        this.endIfIdle(session);
      });
    });
    session.on("error", () => session.destroy());
    // At every silence, not only the first: session.setTimeout's callback is a `once` listener of "timeout", and only a
    // stream's activity re-arms its timer, not PINGs. An answer to the probe re-arms it, and so does a peer's own PING,
    // which shows it alive as well (a relay PINGs its upstreams every second or five).
    session.setTimeout(this.http2KeepaliveMs);
    session.on("timeout", () => this.probe(session));
    session.on("ping", () => session.setTimeout(this.http2KeepaliveMs));
    session.once("close", () => {
      clearTimeout(idle);
      this.sessions.delete(session);
      this.openStreams.delete(session);
      socket.destroy();
    });
  }

  /** probe pings a silent session: answered in time, the session's timeout is re-armed for its next silence; not, it is destroyed. */
  private probe(session: http2.ServerHttp2Session): void {
    if (session.destroyed) return;
    pingWithin(session, this.http2KeepaliveMs, (error) => {
      if (error !== undefined) session.destroy();
      else if (!session.destroyed) session.setTimeout(this.http2KeepaliveMs);
    });
  }

  /**
   * sweepSoon has unread sweep the open streams of every session within a
   * quarter of the request timeout (at most a second), and again after that
   * while streams open or an answer waits unsent. No timer runs while no
   * call comes, even with streams kept open (a relay's health watch); a
   * call that ends unsent after such a quiet spell is found once the next
   * stream opens.
   */
  private sweepSoon(): void {
    if (this.sweeping !== undefined) return;
    this.sweeping = setTimeout(() => this.sweep(), Math.min(this.requestTimeoutMs / 4, 1_000));
    this.sweeping.unref();
  }

  /** sweep is sweepSoon's timer: one sweep, and the next if one is due. */
  private sweep(): void {
    this.sweeping = undefined;
    const opened = this.opened;
    this.opened = false;
    if (this.unread.sweep(this.openStreams.values(), performance.now()) || opened) this.sweepSoon();
  }

  /** endIfIdle destroys a closing session that has no open stream, once its GOAWAY had a turn to go out. */
  private endIfIdle(session: http2.ServerHttp2Session): void {
    if (!session.closed || session.destroyed || this.openStreams.get(session)?.size !== 0) return;
    setImmediate(() => session.destroy());
  }

  /** trackH1 follows an answer in flight on an HTTP/1.1 connection, which closes after its last answer once closing. */
  private trackH1(socket: net.Socket, res: http.ServerResponse): void {
    const connection = this.h1Connections.get(socket)!;
    connection.answers.add(res);
    if (this.closing) res.shouldKeepAlive = false;
    res.once("close", () => {
      connection.answered(res);
      if (this.closing && connection.answers.size === 0) endAfterAnswer(socket);
    });
  }

  /**
   * beforeTls reads a connection's first byte before the TLS server takes
   * it: a TLS handshake is emitted on it (wrapped and handshaken there, the
   * byte put back), and cleartext HTTP gets the refusal's answer.
   */
  private beforeTls(socket: net.Socket, server: tls.Server): void {
    socket.setNoDelay(true);
    socket.on("error", () => socket.destroy());
    sniff(
      socket,
      this.requestTimeoutMs,
      (head) => (head[0] === TLS_HANDSHAKE_RECORD ? "tls" : httpVersionOf(head)),
      (kind) => {
        if (kind === "tls") server.emit("connection", socket);
        else if (kind === "h2") this.refusal.http2(socket);
        else this.refusal.http1(socket);
      },
    );
  }

  /** route hands a connection (after its TLS handshake, if any) to the http2 or the http server, by its first bytes. */
  private route(socket: net.Socket): void {
    socket.setNoDelay(true);
    this.connections++;
    this.sockets.add(socket);
    socket.once("close", () => this.sockets.delete(socket));
    socket.on("error", () => socket.destroy());
    this.unsorted.add(socket);
    socket.once("close", () => this.unsorted.delete(socket));
    sniff(socket, this.requestTimeoutMs, httpVersionOf, (version) => {
      this.unsorted.delete(socket);
      if (version === "h1") {
        this.h1Connections.set(socket, new H1Connection(socket));
        socket.once("close", () => this.h1Connections.delete(socket));
        return void this.h1.emit("connection", socket);
      }
      // The http2 server makes the session (and emits "session") within this call.
      this.handingOver = socket;
      this.h2.emit("connection", socket);
      this.handingOver = undefined;
    });
  }
}

/** LINGER_MS is how long a connection told `Connection: close` may stay open after its last answer before it is destroyed. */
const LINGER_MS = 1_000;

/**
 * endAfterAnswer half-closes an HTTP/1.1 connection whose last answer was
 * written, so the client reads it whole and closes its side; a client that
 * does not is cut after LINGER_MS.
 */
function endAfterAnswer(socket: net.Socket): void {
  socket.end();
  setTimeout(() => socket.destroy(), LINGER_MS).unref();
}

/** httpVersionOf tells HTTP/2 (its preface) from HTTP/1.1 by a connection's first bytes; undefined: more are needed. */
function httpVersionOf(head: Buffer): "h1" | "h2" | undefined {
  const n = Math.min(head.length, H2_PREFACE.length);
  if (!head.subarray(0, n).equals(H2_PREFACE.subarray(0, n))) return "h1";
  return n < H2_PREFACE.length ? undefined : "h2";
}

/**
 * sniff reads a connection's first bytes until decide can tell what they
 * are, puts them back on the socket and hands it on; a connection that does
 * not say within timeoutMs is cut.
 */
function sniff<T>(socket: net.Socket, timeoutMs: number, decide: (head: Buffer) => T | undefined, then: (kind: T) => void): void {
  let head = Buffer.alloc(0);
  const silent = setTimeout(() => socket.destroy(), timeoutMs);
  silent.unref();
  socket.once("close", () => clearTimeout(silent));
  const read = () => {
    for (let chunk = socket.read() as Buffer | null; chunk !== null; chunk = socket.read() as Buffer | null) head = Buffer.concat([head, chunk]);
    const kind = head.length === 0 ? undefined : decide(head);
    if (kind === undefined) return;
    clearTimeout(silent);
    socket.off("readable", read);
    socket.unshift(head);
    then(kind);
  };
  socket.on("readable", read);
}

/** secureContextOptions are the TLS options of a ListenerTls: with a client CA, a client certificate signed by it is required. */
function secureContextOptions(secure: ListenerTls): tls.TlsOptions {
  const { cert, key, clientCa } = secure;
  return clientCa === undefined ? { cert, key } : { cert, key, ca: clientCa, requestCert: true, rejectUnauthorized: true };
}
