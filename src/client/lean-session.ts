import * as http2 from "node:http2";
import type { GrpcTransportOptions } from "@connectrpc/connect-node";
import { HELD_PING_MS, HeldCalls } from "../protocol/held-calls.js";
import { noSniForIp } from "../protocol/peer-tls.js";
import { destroyIfSilent, pingWithin } from "../protocol/ping-within.js";
import type { ClientTls } from "./metadata-client.js";

/** SessionManager is what connect-node's transports take to open their streams on a connection kept elsewhere. */
type SessionManager = NonNullable<GrpcTransportOptions["sessionManager"]>;

/** CONNECT_MS bounds the wait for a connection: a server that does not accept by then is taken for gone. */
const CONNECT_MS = 1_000;

/** PING_MS is how often a lean connection (a relay's, a member's to other shards) is PINGed by default, and how long the answer may take. */
const PING_MS = 5_000;

/**
 * LeanSession keeps one HTTP/2 connection to a server, made again on the
 * next request once it closed. It PINGs the connection every `pingMs` and
 * closes it when a PING is not answered within as long (a server paused or
 * cut off), which fails the streams on it. Its errors never go uncaught:
 * each stream hears its own end. It is also the session manager of
 * connect-node's transports for the calls the lean transport does not make
 * (streams: the relay's health watches).
 */
export class LeanSession implements SessionManager {
  readonly authority: string;
  private current: http2.ClientHttp2Session | undefined;
  /** held counts the calls waiting on current, and PINGs it when one waits long (HeldCalls). */
  private held: HeldCalls | undefined;
  private unheard = false;

  constructor(
    private readonly baseUrl: string,
    private readonly tls?: ClientTls,
    private readonly pingMs = PING_MS,
    private readonly heldPingMs = HELD_PING_MS,
  ) {
    this.authority = new URL(baseUrl).origin;
  }

  /** open is the connection, made now if there is none. */
  open(): http2.ClientHttp2Session {
    if (this.current !== undefined && !this.current.closed && !this.current.destroyed) return this.current;
    const opened = http2.connect(this.baseUrl, { ...this.tls, ...noSniForIp(this.baseUrl), settings: { initialWindowSize: 16 << 20 } });
    const timer = setTimeout(() => opened.destroy(new Error(`no connection within ${CONNECT_MS} ms`)), CONNECT_MS);
    let pinging = false;
    const ping = setInterval(() => {
      if (opened.closed || opened.destroyed || pinging) return;
      pinging = true;
      pingWithin(opened, this.pingMs, (error) => {
        pinging = false;
        this.unheard = error !== undefined;
        if (error) opened.destroy(error);
      });
    }, this.pingMs);
    ping.unref();
    opened.once("connect", () => clearTimeout(timer));
    // Its SETTINGS, not the connection: the kernel accepts connections for a paused process too.
    opened.once("remoteSettings", () => (this.unheard = false));
    opened.on("error", () => undefined); // each stream on it hears its own end
    opened.once("close", () => {
      clearTimeout(timer);
      clearInterval(ping);
      if (this.current === opened) this.current = undefined;
    });
    opened.unref();
    this.current = opened;
    this.held = new HeldCalls(opened, this.heldPingMs);
    return opened;
  }

  /** call opens a unary call's stream on the connection; it counts as waiting (HeldCalls) until it closes. */
  call(headers: http2.OutgoingHttpHeaders): http2.ClientHttp2Stream {
    const stream = this.open().request(headers);
    const held = this.held!;
    held.add(stream);
    stream.once("close", () => held.done(stream));
    return stream;
  }

  request(
    method: string,
    path: string,
    headers: http2.OutgoingHttpHeaders,
    options: Omit<http2.ClientSessionRequestOptions, "signal">,
  ): Promise<http2.ClientHttp2Stream> {
    return Promise.resolve(this.open().request({ ...headers, ":method": method, ":path": path }, options));
  }

  notifyResponseByteRead(): void {
    // A stream's bytes say nothing the PINGs do not: they go on regardless.
  }

  /**
   * silent is true once one of its PINGs went unanswered within pingMs,
   * until the server is heard again (a PING answered, or its SETTINGS on a
   * new connection): a server paused or cut off stays silent however often
   * the connection is made again.
   */
  get silent(): boolean {
    return this.unheard;
  }

  /** drop closes the open connection now, if any, failing its calls (its server lost the lead and was found silent). */
  drop(): void {
    this.current?.destroy(new Error("the server lost the lead and is silent"));
  }

  /** check PINGs the open connection now, if any, and closes it unless the answer comes within ms (its server lost the lead). */
  check(ms: number): void {
    if (this.current !== undefined) destroyIfSilent(this.current, ms);
  }

  /** close closes the connection once its streams end. */
  close(): void {
    this.current?.close();
  }
}
