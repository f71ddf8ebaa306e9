import * as http2 from "node:http2";
import type { Readable } from "node:stream";
import { Code, ConnectError } from "@connectrpc/connect";
import type { BodyBudget } from "./body-budget.js";
import { deadlineExceeded } from "./deadline.js";

/** BodyStream is a request body as Node's HTTP/1.1 and HTTP/2 servers give it (an IncomingMessage or an Http2ServerRequest). */
export type BodyStream = Readable & {
  readonly headers: Record<string, string | string[] | undefined>;
  readonly socket: object;
  readonly stream?: http2.ServerHttp2Stream;
};

/**
 * readBody reads a whole request body of at most maxBytes, holding its
 * bytes against the budget while it arrives. A body over the limit (by
 * its content-length, or as it arrives) is consumed to its end without
 * being kept, then fails with RESOURCE_EXHAUSTED: answering before the end
 * would leave the HTTP/2 stream half open. A body the budget cannot hold
 * fails at once with RESOURCE_EXHAUSTED; the rest of it is discarded and,
 * over HTTP/2, the stream is reset (NO_ERROR) once answered. A client that
 * goes away mid-body fails it with CANCELED, and one whose deadline passes
 * before the end, or that takes longer than timeoutMs (a slow sender),
 * with DEADLINE_EXCEEDED (the rest discarded, as above).
 */
export function readBody(body: BodyStream, maxBytes: number, budget: BodyBudget, deadline?: AbortSignal, timeoutMs = 60_000): Promise<Buffer> {
  const connection = body.stream?.session ?? body.socket;
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = Number(body.headers["content-length"] ?? 0) > maxBytes ? Number.POSITIVE_INFINITY : 0;
    let held = 0;
    const done = () => {
      body.off("data", onData);
      body.off("end", onEnd);
      body.off("error", onError);
      body.off("close", onClose);
      deadline?.removeEventListener("abort", onDeadline);
      clearTimeout(slow);
      budget.give(connection, held);
      held = 0;
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > maxBytes) {
        chunks.length = 0;
        budget.give(connection, held);
        held = 0;
        return;
      }
      try {
        budget.take(connection, chunk.length);
      } catch (error) {
        done();
        abandon(body);
        reject(error);
        return;
      }
      held += chunk.length;
      chunks.push(chunk);
    };
    const onEnd = () => {
      done();
      if (size > maxBytes) reject(new ConnectError(`request body larger than ${maxBytes} bytes`, Code.ResourceExhausted));
      else resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size));
    };
    const onError = (error: Error) => {
      done();
      reject(error);
    };
    const onClose = () => {
      done();
      reject(new ConnectError("the client closed the request before its end", Code.Canceled));
    };
    const cut = (error: ConnectError) => {
      done();
      abandon(body);
      reject(error);
    };
    const onDeadline = () => cut(deadlineExceeded());
    const slow = setTimeout(
      () => cut(new ConnectError(`the request body did not arrive whole within ${timeoutMs} ms (--request-timeout)`, Code.DeadlineExceeded)),
      timeoutMs,
    );
    if (deadline?.aborted) return onDeadline();
    deadline?.addEventListener("abort", onDeadline, { once: true });
    body.on("data", onData);
    body.once("end", onEnd);
    body.once("error", onError);
    body.once("close", onClose);
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
