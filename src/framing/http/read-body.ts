import * as http2 from "node:http2";
import type { Readable } from "node:stream";
import { Code, ConnectError } from "@connectrpc/connect";
import type { Held } from "../../service/body-reader.js";
import { deadlineExceeded } from "../../service/call-deadline.js";
import type { BodyBudget } from "./body-budget.js";
import type { BodyPool } from "./body-pool.js";

/** BodyStream is a request body as Node's HTTP/1.1 and HTTP/2 servers give it (an IncomingMessage or an Http2ServerRequest). */
export type BodyStream = Readable & {
  readonly headers: Record<string, string | string[] | undefined>;
  readonly socket: object;
  readonly stream?: http2.ServerHttp2Stream;
};

/**
 * readBody reads a whole request body of at most maxBytes, holding its
 * bytes against the budget from their arrival until the caller releases
 * them (HeldBytes.release), whatever the call waits for meanwhile (the
 * startup hold, the large-call lane, decoding). A body over the limit (by
 * its content-length, or as it arrives) is consumed to its end without
 * being kept, then fails with RESOURCE_EXHAUSTED: answering before the end
 * would leave the HTTP/2 stream half open. A body the budget cannot hold
 * fails at once with RESOURCE_EXHAUSTED; the rest of it is discarded and,
 * over HTTP/2, the stream is reset (NO_ERROR) once answered. A client that
 * goes away mid-body fails it with CANCELED, and one whose deadline passes
 * before the end, or that `slowReads` finds too slow, with
 * DEADLINE_EXCEEDED (the rest discarded, as above).
 */
export function readBody(
  body: BodyStream,
  maxBytes: number,
  budget: BodyBudget,
  deadline?: AbortSignal,
  slowReads?: SlowReads,
  pool?: BodyPool,
): Promise<HeldBytes> {
  return new Promise((resolve, reject) => new BodyRead(body, maxBytes, budget, deadline, slowReads, pool, resolve, reject));
}

/**
 * HeldBytes are a request's bytes as the server holds them: counted in the
 * body budget until release() (idempotent), which also gives a pooled
 * buffer back to its pool. `take` counts more bytes that the call makes
 * from them (a decompressed message) in the same budget.
 */
export class HeldBytes implements Held {
  private held: number;

  constructor(
    /** bytes is the body as read. */
    readonly bytes: Buffer,
    private readonly budget: BodyBudget,
    private readonly connection: object,
    private pooled?: { pool: BodyPool; backing: Buffer },
  ) {
    this.held = bytes.length;
  }

  /** take counts `bytes` more, or throws RESOURCE_EXHAUSTED (counting nothing) when the budget cannot hold them. */
  take(bytes: number): void {
    this.budget.take(this.connection, bytes);
    this.held += bytes;
  }

  /** give returns `bytes` of what take counted (no more than it holds). */
  give(bytes: number): void {
    const given = Math.min(bytes, this.held);
    this.budget.give(this.connection, given);
    this.held -= given;
  }

  /** room is how many more bytes take would accept now, at most `limit`. */
  room(limit: number): number {
    return Math.min(limit, this.budget.room(this.connection));
  }

  /** release returns everything held; the bytes may be garbage collected once dropped, or, pooled, reused by the next call. */
  release(): void {
    this.give(this.held);
    if (this.pooled === undefined) return;
    this.pooled.pool.give(this.pooled.backing);
    this.pooled = undefined;
  }
}

/**
 * BodyRead is one body being read. Its listeners are prototype methods
 * bound once, not closures: under tsx every closure made per call costs a
 * defineProperty (esbuild's keepNames), which showed in the B=1 profile.
 */
class BodyRead {
  private readonly connection: object;
  private readonly chunks: Buffer[] = [];
  private size: number;
  private held = 0;
  /** startedMs is when the read began (performance.now()), for SlowReads. */
  readonly startedMs = performance.now();
  private readonly onData = this.data.bind(this);
  private readonly onEnd = this.end.bind(this);
  private readonly onError = this.error.bind(this);
  private readonly onClose = this.close.bind(this);
  private readonly onDeadline = this.deadlinePassed.bind(this);

  constructor(
    private readonly body: BodyStream,
    private readonly maxBytes: number,
    private readonly budget: BodyBudget,
    private readonly deadline: AbortSignal | undefined,
    private readonly slowReads: SlowReads | undefined,
    private readonly pool: BodyPool | undefined,
    private readonly resolve: (bytes: HeldBytes) => void,
    private readonly reject: (error: unknown) => void,
  ) {
    this.connection = body.stream?.session ?? body.socket;
    this.size = Number(body.headers["content-length"] ?? 0) > maxBytes ? Number.POSITIVE_INFINITY : 0;
    if (deadline?.aborted) {
      this.cut(deadlineExceeded());
      return;
    }
    deadline?.addEventListener("abort", this.onDeadline, { once: true });
    slowReads?.add(this);
    body.on("data", this.onData);
    body.once("end", this.onEnd);
    body.once("error", this.onError);
    body.once("close", this.onClose);
  }

  /** cut fails the read now (too slow, past its deadline, over the budget); the rest of the body is discarded. */
  cut(error: ConnectError): void {
    this.done();
    abandon(this.body);
    this.reject(error);
  }

  private data(chunk: Buffer): void {
    this.size += chunk.length;
    if (this.size > this.maxBytes) {
      this.chunks.length = 0;
      this.budget.give(this.connection, this.held);
      this.held = 0;
      return;
    }
    try {
      this.budget.take(this.connection, chunk.length);
    } catch (error) {
      this.cut(error as ConnectError);
      return;
    }
    this.held += chunk.length;
    this.chunks.push(chunk);
  }

  private end(): void {
    const held = this.held;
    this.held = 0; // handed over to HeldBytes, not given back by done()
    this.done();
    if (this.size > this.maxBytes) this.reject(new ConnectError(`request body larger than ${this.maxBytes} bytes`, Code.ResourceExhausted));
    else this.resolve(this.joined(held));
  }

  /** joined is the body read, in one buffer: its one chunk, or its chunks joined (into a pooled buffer when there is a pool). */
  private joined(total: number): HeldBytes {
    if (this.chunks.length === 1) return new HeldBytes(this.chunks[0]!, this.budget, this.connection);
    const pooled = this.pool?.join(this.chunks, total);
    if (pooled === undefined) return new HeldBytes(Buffer.concat(this.chunks, total), this.budget, this.connection);
    return new HeldBytes(pooled.body, this.budget, this.connection, { pool: this.pool!, backing: pooled.backing });
  }

  private error(error: Error): void {
    this.done();
    this.reject(error);
  }

  private close(): void {
    this.done();
    this.reject(new ConnectError("the client closed the request before its end", Code.Canceled));
  }

  private deadlinePassed(): void {
    this.cut(deadlineExceeded());
  }

  private done(): void {
    const body = this.body;
    body.off("data", this.onData);
    body.off("end", this.onEnd);
    body.off("error", this.onError);
    body.off("close", this.onClose);
    this.deadline?.removeEventListener("abort", this.onDeadline);
    this.slowReads?.delete(this);
    this.budget.give(this.connection, this.held);
    this.held = 0;
  }
}

/**
 * SlowReads cuts the bodies that take longer than timeoutMs to arrive (slow
 * senders), with DEADLINE_EXCEEDED, from one timer for all of them rather
 * than a timer per call: a body is cut between timeoutMs and 1.25 ×
 * timeoutMs (at most 1 s more) after it began. The timer runs only while a
 * body is being read (a sweep that finds none stops it, so an idle server
 * is not woken for it) and does not keep the process alive; close() stops it.
 */
export class SlowReads {
  private readonly reads = new Set<BodyRead>();
  private timer: NodeJS.Timeout | undefined;

  constructor(readonly timeoutMs: number) {}

  add(read: BodyRead): void {
    this.reads.add(read);
    if (this.timer !== undefined) return;
    this.timer = setInterval(() => this.sweep(), Math.min(this.timeoutMs / 4, 1_000));
    this.timer.unref();
  }

  delete(read: BodyRead): void {
    this.reads.delete(read);
  }

  close(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  private sweep(): void {
    if (this.reads.size === 0) {
      this.close();
      return;
    }
    const now = performance.now();
    for (const read of this.reads) {
      if (now - read.startedMs < this.timeoutMs) continue;
      read.cut(new ConnectError(`the request body did not arrive whole within ${this.timeoutMs} ms (--request-timeout)`, Code.DeadlineExceeded));
    }
  }
}

/** LINGER_BYTES and LINGER_MS bound what answering a refusal waits for (lingerForBody). */
const LINGER_BYTES = 64 * 1024;
const LINGER_MS = 1_000;

/**
 * lingerForBody lets a small HTTP/1.1 body (at most LINGER_BYTES by its
 * content-length) of a call refused before it was read arrive, and
 * discards it, for at most LINGER_MS: the answer closes the connection,
 * and a body that reached the server after it closed would make the
 * client's kernel reset the connection, losing the answer (a client saw
 * ECONNRESET instead of 503 REASON_SHUTTING_DOWN during a drain). HTTP/2
 * streams need none of this: they end without closing the connection.
 */
export async function lingerForBody(body: BodyStream): Promise<void> {
  const length = Number(body.headers["content-length"] ?? Number.NaN);
  if (body.stream !== undefined || (body as { complete?: boolean }).complete === true || !(length <= LINGER_BYTES)) return;
  body.resume();
  await new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, LINGER_MS);
    const done = () => {
      clearTimeout(timer);
      resolve();
    };
    body.once("end", done);
    body.once("close", done);
  });
}

/** abandon discards the rest of a refused body; an HTTP/2 stream is reset with NO_ERROR once its answer is sent, which tells the client to stop sending. */
function abandon(body: BodyStream): void {
  body.resume();
  const stream = body.stream;
  if (stream === undefined) return;
  const reset = () => {
    if (!stream.closed) stream.close(http2.constants.NGHTTP2_NO_ERROR);
  };
  // Node's compatibility layer sends the trailers on "wantTrailers" (its listener comes first); the reset follows them.
  stream.once("wantTrailers", () => setImmediate(reset));
}
