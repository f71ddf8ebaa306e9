import type * as http from "node:http";
import * as http2 from "node:http2";
import { BodyBudget } from "../framing/http/body-budget.js";
import { LOG_POSITION } from "../protocol/headers.js";
import { HeldCalls } from "../protocol/held-calls.js";
import { noSniForIp, type PeerTls } from "../protocol/peer-tls.js";
import { destroyIfSilent, LEFT_PING_MS } from "../protocol/ping-within.js";
import type { Leadership } from "../service/leadership.js";

/** CONNECT_MS bounds the wait for a connection to the leader: a leader that does not answer by then is taken for gone. */
const CONNECT_MS = 1_000;

/** HOP_BY_HOP are the headers of one connection, never passed on (RFC 9110 7.6.1), with HTTP/2's own. */
const HOP_BY_HOP = new Set(["connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "host", "http2-settings"]);

/** GRPC_STATUS are the headers of a gRPC status, which end an answer (in its trailers, or in the headers of an answer of trailers only). */
const GRPC_STATUS = new Set(["grpc-status", "grpc-message", "grpc-status-details-bin"]);

/** LOCAL_PREFIXES are the paths a member answers itself, leader or not: health, reflection, replication (snapshots, status), the topology and metrics. */
const LOCAL_PREFIXES = ["/grpc.", "/hf3fs.metadata.internal.", "/hf3fs.metadata.v1.ClusterService/", "/metrics"];

/**
 * FORWARDED marks a call a standby forwarded. A member answers such a call
 * itself, leader or not, so a call never goes round between members whose
 * views of the leader are both stale for a moment.
 */
const FORWARDED = "hf3fs-forwarded-by";

/** RETRY_MS is the pause before a call whose connection broke before its answer is sent again. */
const RETRY_MS = 100;

/**
 * REACH_AGAIN_MS is how soon a leader that could not be reached is tried
 * again while the member names no other: restarted by its supervisor, a
 * leader comes back at the same address and may lead again there (its
 * own earlier term ended by itself), a change of term that leaves the URL
 * the same.
 */
const REACH_AGAIN_MS = 250;

/** Unanswered is a call that failed before its answer began: it may be sent again (to the next leader, if this one is gone). */
class Unanswered extends Error {}

/** Unreached is a call none of which went to the leader: it goes to the next leader. */
class Unreached extends Unanswered {}

/** Unsendable is a call the connection to the leader refused to carry (its headers): it fails alone, and the connection stays. */
class Unsendable extends Error {}

/** ForwardLimits bound what a standby holds for the calls it forwards, as its edge bounds its own calls. */
export interface ForwardLimits {
  readonly maxBufferedBytes: number;
  readonly maxBufferedBytesPerConnection: number;
  /** requestTimeoutMs bounds the time to receive a body kept for forwarding (--request-timeout). */
  readonly requestTimeoutMs: number;
}

/** KeptBody is a request's body as read before it is forwarded: all of it (whole), or its start, the rest still to stream; its bytes count in the budget until release. */
interface KeptBody {
  readonly chunks: Buffer[];
  readonly whole: boolean;
  release(): void;
}

type Request = http.IncomingMessage | http2.Http2ServerRequest;
type Response = http.ServerResponse | http2.Http2ServerResponse;

/**
 * LeaderForward passes the calls that reach a standby of a cluster to its
 * leader, in any framing, as they came (headers, body, answer, trailers),
 * so a client that knows one member needs no redirect (--standby-calls
 * forward). The leader is the one the member read from etcd (Leadership);
 * while none is known the call waits for one, at most `holdMs`, and then
 * gets the member's own answer (NOT_LEADER or UNAVAILABLE, as without
 * forwarding), as it does when this member leads by then. A call whose
 * leader cannot be reached waits for the next the same way, or for that
 * one to answer again at its address (REACH_AGAIN_MS). A call whose
 * answer began is never sent again: its outcome is the leader's.
 */
export class LeaderForward {
  private connection: { url: string; session: Promise<http2.ClientHttp2Session> } | undefined;
  /** held counts the calls waiting on each connection, and PINGs it when one waits long (HeldCalls). */
  private readonly held = new WeakMap<http2.ClientHttp2Session, HeldCalls>();
  private closed = false;
  /** selfUrl is this member's own URL (set once it listens): a call whose body was read when the member came to lead goes there. */
  selfUrl = "";

  /** budget bounds the bytes of the bodies kept for forwarding, as the edge bounds its own (--max-buffered-bytes). */
  private readonly budget: BodyBudget;

  /**
   * @param holdMs is how long a call waits for a leader (--startup-hold).
   * @param maxBodyBytes bounds a body kept for resending (--max-body-bytes and the envelope).
   * @param callName names a request's call as the edge does (callNameOf).
   * @param admits is the edge's check of the caller's token for a call: one it refuses is answered here, by the edge, not forwarded.
   * @param isRead tells a call that only reads (READS): a caught-up standby answers it itself.
   * @param isLookup tells a lookup (LOOKUPS): one that waited --read-hold while this member knew no leader is answered here, as misses.
   */
  constructor(
    private readonly leadership: Leadership,
    private readonly holdMs: number,
    private readonly maxBodyBytes: number,
    private readonly limits: ForwardLimits,
    private readonly callName: (req: Request) => string,
    private readonly admits: (name: string, req: Request) => boolean,
    private readonly isRead: (name: string) => boolean,
    private readonly isLookup: (name: string) => boolean,
    private readonly peerTls?: PeerTls,
  ) {
    this.budget = new BodyBudget(limits.maxBufferedBytes, limits.maxBufferedBytesPerConnection);
  }

  /**
   * takes tells whether a request goes to the leader: a call, while this
   * member does not lead, from a caller whose token the edge admits (one it
   * does not is answered here: nothing of an unauthenticated call is held
   * or sent on).
   */
  takes(req: Request): boolean {
    if (this.closed || this.leadership.refusal === undefined || req.headers[FORWARDED] !== undefined) return false;
    const path = req.url ?? "/";
    if (LOCAL_PREFIXES.some((prefix) => path.startsWith(prefix))) return false;
    const name = this.callName(req);
    // A read this standby holds fresh enough is answered here (StandbyReads).
    if (this.isRead(name) && this.leadership.reads?.takes(req, req.headers) === true) return false;
    // A lookup on a member that has known no leader for --read-hold is answered here, as misses (answeringMisses).
    if (this.isLookup(name) && this.leadership.missesLookups) return false;
    return this.admits(name, req);
  }

  /**
   * forward passes one call to the leader and its answer back; `here`
   * answers it on this member instead (it leads now, or no leader came in
   * time). The body is kept (within the limits of one body and of the
   * buffered bytes) until the leader answers, so a call that fails before
   * its answer begins goes again, to the next leader if that one is gone:
   * every call of the service is safe to repeat. A body past those limits
   * is streamed to the leader once.
   */
  async forward(req: Request, res: Response, here: () => void): Promise<void> {
    // A read that follows a write not applied here yet waits briefly for it, then is answered here.
    if ((await this.leadership.reads?.catchUp(req)) === true) return here();
    const deadline = Date.now() + this.holdMs;
    // A lookup waits for a leader no longer than --read-hold allows (then this member answers it, as misses).
    const lookup = this.isLookup(this.callName(req));
    const waitUntil = () => (lookup ? Math.min(deadline, Date.now() + Math.ceil(this.leadership.lookupsMissedInMs())) : deadline);
    let leaderUrl = await this.leaderAfter("", waitUntil);
    if (leaderUrl === "") return here(); // before the body is read: the member's own path reads it
    const body = await this.keep(req).catch(() => undefined);
    if (body === undefined) return abort(res, new Error("the request failed while it was read"), false);
    try {
      for (;;) {
        try {
          await this.send(leaderUrl, req, body, res);
          return;
        } catch (error) {
          // Only a connection that failed a call before its answer is given up: a call that fails alone leaves it to the others.
          if (error instanceof Unanswered) this.drop(leaderUrl);
          if (error instanceof Unsendable) return abort(res, error, false);
          if (!(error instanceof Unanswered) || !body.whole) return abort(res, error as Error, !(error instanceof Unanswered));
          // Not reached: wait for another leader. Reached but unanswered (its connection broke): the same or the next, after a pause.
          const unreachable = error instanceof Unreached ? leaderUrl : "";
          if (unreachable === "") await new Promise((resolve) => setTimeout(resolve, RETRY_MS));
          leaderUrl = await this.leaderAfter(unreachable, waitUntil);
          // This member leads now, or answers this lookup as misses: the body is read, so the call goes through this member's own port to its own path.
          if (leaderUrl === "" && (this.leadership.refusal === undefined || (lookup && this.leadership.missesLookups))) leaderUrl = this.selfUrl;
          // No leader came in time: the client gets a call refused, to retry.
          if (leaderUrl === "") return abort(res, error as Error, false);
        }
      }
    } finally {
      body.release();
    }
  }

  /**
   * keep reads a request's body into memory while it fits in one body
   * (maxBodyBytes and the envelope) and in the budget of buffered bytes;
   * past that it stops, and the rest is streamed (whole false). A body not
   * received within requestTimeoutMs fails the call, as the edge's do.
   */
  private keep(req: Request): Promise<KeptBody> {
    const connection: object = "stream" in req ? (req.stream.session ?? req.stream) : req.socket;
    return new Promise((resolve, reject) => {
      const chunks: Buffer[] = [];
      let held = 0;
      const release = () => this.budget.give(connection, held);
      const slow = setTimeout(
        () => onError(new Error(`the request's body did not arrive within ${this.limits.requestTimeoutMs} ms`)),
        this.limits.requestTimeoutMs,
      );
      const done = (whole: boolean) => {
        clearTimeout(slow);
        req.off("data", onData);
        req.off("end", onEnd);
        req.off("error", onError);
        resolve({ chunks, whole, release });
      };
      const onData = (chunk: Buffer) => {
        chunks.push(chunk);
        if (held + chunk.length > this.maxBodyBytes) return stop();
        try {
          this.budget.take(connection, chunk.length);
          held += chunk.length;
        } catch {
          stop();
        }
      };
      const stop = () => {
        req.pause();
        done(false);
      };
      const onEnd = () => done(true);
      const onError = (error: Error) => {
        clearTimeout(slow);
        release();
        req.off("data", onData);
        req.off("end", onEnd);
        req.off("error", onError);
        reject(error);
      };
      req.on("data", onData);
      req.on("end", onEnd);
      req.on("error", onError);
    });
  }

  /** close ends the connection to the leader; calls that come after are answered here. */
  close(): void {
    this.closed = true;
    if (this.connection !== undefined)
      void this.connection.session.then(
        (session) => session.close(),
        () => undefined,
      );
    this.connection = undefined;
  }

  /**
   * leaderAfter waits until this member names a leader other than `tried`
   * (the one it could not reach), or names `tried` still REACH_AGAIN_MS
   * later, and returns its URL; "" when this member leads, or once
   * `deadline()` (read at each wake) passed.
   */
  private async leaderAfter(tried: string, deadline: () => number): Promise<string> {
    const again = Date.now() + REACH_AGAIN_MS;
    for (;;) {
      const refusal = this.leadership.refusal;
      if (refusal === undefined) return "";
      const url = refusal.subject.leaderUrl ?? "";
      if (url !== "" && (url !== tried || Date.now() >= again)) return url;
      const left = deadline() - Date.now();
      if (left <= 0 || this.closed) return "";
      const signal = AbortSignal.timeout(url === "" ? left : Math.min(left, again - Date.now()));
      await this.leadership.next(signal);
    }
  }

  /**
   * send writes the call to the leader and its answer to res. Unreached
   * when no byte of the call went out; Unanswered when the call went out
   * but no answer began (a connection that broke); any other error once
   * the answer began.
   */
  private async send(leaderUrl: string, req: Request, body: KeptBody, res: Response): Promise<void> {
    const session = await this.session(leaderUrl);
    const headers: http2.OutgoingHttpHeaders = { ":method": req.method ?? "POST", ":path": req.url ?? "/", [FORWARDED]: this.selfUrl || "a standby" };
    for (const [name, value] of Object.entries(req.headers)) {
      if (name.startsWith(":") || HOP_BY_HOP.has(name) || name === FORWARDED || value === undefined) continue;
      // HTTP/2 allows te only as "trailers" (RFC 9113 8.2.2); an HTTP/1.1 caller may send others, which mean nothing to the leader.
      if (name === "te" && value !== "trailers") continue;
      headers[name] = value;
    }
    let upstream: http2.ClientHttp2Stream;
    try {
      upstream = session.request(headers);
      const held = this.held.get(session);
      held?.add(upstream);
      upstream.once("close", () => held?.done(upstream));
    } catch (error) {
      // Nothing was sent: on a connection that closed, the call goes to the next leader; on a live one, the call itself was refused.
      if (session.closed || session.destroyed) throw new Unreached(`the connection to the leader at ${leaderUrl} closed: ${(error as Error).message}`);
      throw new Unsendable(`the call cannot be passed on: ${(error as Error).message}`);
    }
    await new Promise<void>((resolve, reject) => {
      let answered = false;
      let ended = false;
      // What the handlers write to res may throw (the client went away): that fails this call, never the process.
      const guarded =
        <A extends unknown[]>(handle: (...args: A) => void) =>
        (...args: A) => {
          try {
            handle(...args);
          } catch (error) {
            upstream.destroy();
            reject(error);
          }
        };
      upstream.on(
        "response",
        guarded((answer: http2.IncomingHttpHeaders & http2.IncomingHttpStatusHeader) => {
          answered = true;
          // The log position of a write passed on: the reads after it here wait until it is applied (read-your-writes).
          const position = Number(answer[LOG_POSITION]);
          if (position > 0) this.leadership.reads?.wrote(position);
          const out: http.OutgoingHttpHeaders = {};
          const status: http.OutgoingHttpHeaders = {};
          for (const [name, value] of Object.entries(answer)) {
            if (name.startsWith(":") || HOP_BY_HOP.has(name) || value === undefined) continue;
            // A gRPC answer of trailers only (an error) carries its status in its headers: it goes on as headers, then trailers.
            if (GRPC_STATUS.has(name) && req.httpVersionMajor === 2) status[name] = value;
            else out[name] = value;
          }
          res.writeHead(Number(answer[":status"] ?? 502), out);
          if (Object.keys(status).length > 0) (res as http2.Http2ServerResponse).addTrailers(status);
        }),
      );
      upstream.on(
        "trailers",
        guarded((trailers: http2.IncomingHttpHeaders) => {
          if (!("addTrailers" in res) || req.httpVersionMajor !== 2) return;
          const out: http.OutgoingHttpHeaders = {};
          for (const [name, value] of Object.entries(trailers)) if (!name.startsWith(":") && value !== undefined) out[name] = value as string | string[];
          res.addTrailers(out);
        }),
      );
      upstream.on(
        "data",
        guarded((chunk: Buffer) => void (res as http.ServerResponse).write(chunk)),
      );
      upstream.on("end", () => {
        ended = true;
      });
      // Only a stream that ended and closed without a reset is a whole answer: a leader killed mid-answer ends it early, or resets it.
      upstream.on(
        "close",
        guarded(() => {
          if (ended && answered && upstream.rstCode === http2.constants.NGHTTP2_NO_ERROR) {
            res.end();
            resolve();
          } else if (answered) reject(new Error(`the leader at ${leaderUrl} broke off its answer`));
          else reject(new Unanswered(`the leader at ${leaderUrl} closed the call without an answer`));
        }),
      );
      upstream.on("error", (error) => reject(answered ? error : new Unanswered(error.message)));
      for (const chunk of body.chunks) upstream.write(chunk);
      if (body.whole) upstream.end();
      else {
        req.on("error", (error) => upstream.destroy(error));
        req.pipe(upstream);
      }
    });
  }

  /** session is the connection to the leader at url, made once and kept while it lives; Unreached when it cannot be made within CONNECT_MS. */
  private session(url: string): Promise<http2.ClientHttp2Session> {
    if (this.connection?.url === url) return this.connection.session;
    if (this.connection !== undefined) this.drop(this.connection.url);
    const session = new Promise<http2.ClientHttp2Session>((resolve, reject) => {
      const client = http2.connect(url, this.peerTls === undefined ? undefined : { ...this.peerTls, ...noSniForIp(url) });
      const timer = setTimeout(() => client.destroy(new Error(`no connection to the leader at ${url} within ${CONNECT_MS} ms`)), CONNECT_MS);
      client.once("connect", () => {
        clearTimeout(timer);
        this.held.set(client, new HeldCalls(client));
        resolve(client);
        void this.checkWhenLeft(url, client);
      });
      // Every error, the first or a later one (the leader died under a live connection), ends this connection; none may go unheard.
      client.on("error", (error) => {
        clearTimeout(timer);
        reject(new Unreached(`cannot reach the leader at ${url}: ${error.message}`));
        if (this.connection?.session === session) this.connection = undefined;
      });
      client.on("close", () => {
        if (this.connection?.session === session) this.connection = undefined;
      });
      client.unref();
    });
    this.connection = { url, session };
    return session;
  }

  /**
   * checkWhenLeft PINGs the connection to the leader at url each time this
   * member names another leader (or leads), and destroys it unless it
   * answers within LEFT_PING_MS, counted from the PING HeldCalls sent if
   * one is on its way: a leader paused or cut off through its failover
   * would hold the calls on it for as long, and they go again, to the next
   * leader. A live one, a standby now, keeps them.
   */
  private async checkWhenLeft(url: string, client: http2.ClientHttp2Session): Promise<void> {
    const closed = new AbortController();
    client.once("close", () => closed.abort());
    while (!closed.signal.aborted) {
      await this.leadership.next(closed.signal);
      if (!closed.signal.aborted && this.leadership.refusal?.subject.leaderUrl !== url) destroyIfSilent(client, LEFT_PING_MS);
    }
  }

  /** drop forgets the connection to url (it failed, or the leader changed). */
  private drop(url: string): void {
    if (this.connection?.url !== url) return;
    void this.connection.session.then(
      (session) => session.destroy(),
      () => undefined,
    );
    this.connection = undefined;
  }
}

/**
 * abort ends a call that could not be forwarded so that its client sees a
 * failure to retry (every call is safe to repeat). Before the answer began:
 * UNAVAILABLE in the request's framing (gRPC and gRPC-Web in trailers, a
 * 503 whose JSON body is both a Connect error and a JSON route's).
 * After (`began`: its head was written, if not yet sent): the stream reset (HTTP/2 CANCEL, a torn-down call), or the
 * connection closed (HTTP/1.1).
 */
function abort(res: Response, error: Error, began: boolean): void {
  if (began || res.headersSent) {
    breakOff(res, error);
    return;
  }
  const message = `this standby could not forward the call to the leader: ${error.message}`;
  const type = String(res.req.headers["content-type"] ?? "");
  if (type.startsWith("application/grpc")) {
    const status = { "grpc-status": "14", "grpc-message": encodeURIComponent(message) };
    if (type.startsWith("application/grpc-web") || !("addTrailers" in res) || res.req.httpVersionMajor !== 2) {
      res.writeHead(200, { "content-type": type, ...status });
    } else {
      res.writeHead(200, { "content-type": type });
      (res as http2.Http2ServerResponse).addTrailers(status);
    }
    res.end();
    return;
  }
  res.writeHead(503, { "content-type": "application/json" });
  res.end(JSON.stringify({ code: "unavailable", message, detail: message, reason: "REASON_NOT_LEADER" }));
}

/** breakOff ends a call whose answer cannot be written (any more): its stream reset (HTTP/2 CANCEL, a torn-down call), its connection closed (HTTP/1.1). */
export function breakOff(res: Response, error: Error): void {
  if ("stream" in res) res.stream.close(http2.constants.NGHTTP2_CANCEL);
  else res.destroy(error);
}
