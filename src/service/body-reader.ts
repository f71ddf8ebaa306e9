/** RequestHeaders are a request's headers as Node's HTTP servers give them. */
export type RequestHeaders = Record<string, string | string[] | undefined>;

/** RequestBody is a request as the edge sees it: its headers; its bytes come through a BodyReader. */
export interface RequestBody {
  readonly headers: RequestHeaders;
}

/**
 * Held are a request's bytes as the server holds them: counted in the
 * body budget until release() (idempotent). `take` counts more bytes that
 * the call makes from them (a decompressed message) in the same budget.
 */
export interface Held {
  /** bytes is the body as read. */
  readonly bytes: Buffer;
  /** take counts `bytes` more, or throws RESOURCE_EXHAUSTED (counting nothing) when the budget cannot hold them. */
  take(bytes: number): void;
  /** give returns `bytes` of what take counted. */
  give(bytes: number): void;
  /** room is how many more bytes take would accept now, at most `limit`. */
  room(limit: number): number;
  release(): void;
}

/**
 * BodyReader is how the edge reads the bodies of the requests a framing
 * hands it (framing/http/body-reader.ts reads node:http's and node:http2's):
 * within a limit and a deadline, in one budget of buffered bytes.
 */
export interface BodyReader {
  /** read reads a whole body of at most maxBytes (RESOURCE_EXHAUSTED past it), joined into a pooled buffer when `pooled`. */
  read(body: RequestBody, maxBytes: number, deadline: AbortSignal | undefined, pooled: boolean): Promise<Held>;
  /** linger lets the small rest of a body refused before it was read arrive, so that the answer reaches the client. */
  linger(body: RequestBody): Promise<void>;
  /** holder counts, in the same budget, the bytes of a request read message by message (a stream of an open service). */
  holder(body: RequestBody): Held;
  /** close stops the reader's timers (the server is closing). */
  close(): void;
}
