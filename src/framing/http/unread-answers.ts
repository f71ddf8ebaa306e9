import * as http2 from "node:http2";

/**
 * UnreadAnswers cancels answers their callers do not take. An HTTP/2
 * stream whose answer the server has ended but cannot send (its caller
 * opens no flow-control window: a client that stopped reading) holds that
 * answer, and the stream stays open, so its connection is never idle: up
 * to a connection's concurrent streams of held answers, for as long as the
 * caller answers PINGs. A stream seen so at two looks at least limitMs
 * apart is reset (CANCEL), which frees its answer.
 */
export class UnreadAnswers {
  /** seen is when a look first found each stream's answer ended and unsent. */
  private readonly seen = new WeakMap<http2.Http2Stream, number>();

  constructor(private readonly limitMs: number) {}

  /** look checks a session's open streams at `now` (ms), cancelling those whose answer has waited unsent for limitMs. */
  look(streams: Iterable<http2.Http2Stream>, now: number): void {
    for (const stream of streams) {
      if (!stream.writableEnded || stream.writableFinished || stream.closed) continue;
      const since = this.seen.get(stream);
      if (since === undefined) this.seen.set(stream, now);
      else if (now - since >= this.limitMs) stream.close(http2.constants.NGHTTP2_CANCEL);
    }
  }
}
