/**
 * An Answer is what the listener follows of a call's answer until it
 * closes (an HTTP/2 stream). Ended and not finished, it holds bytes its
 * caller has not taken (writableLength).
 */
export type Answer = { readonly writableEnded: boolean; readonly writableFinished: boolean; readonly writableLength: number };

/**
 * UnreadAnswers cancels answers their callers do not take. An answer the
 * server has ended but cannot send (its caller opens no HTTP/2 window: a
 * client that stopped reading) holds its bytes, and keeps its stream open,
 * for as long as the caller stays connected. At each sweep, an answer
 * found so at two sweeps at least limitMs apart is cancelled; and while
 * the answers found so hold more than maxBytes in all, those of the
 * connection holding the most are cancelled, then the next's: a few
 * callers that stop reading cannot grow the server without bound before
 * the time limit.
 */
export class UnreadAnswers<A extends Answer> {
  /** seen is when a sweep first found each answer ended and unsent. */
  private readonly seen = new WeakMap<A, number>();
  /** cancelled counts the answers cancelled since the start, by the limit that cancelled them. */
  readonly cancelled = { time: 0, bytes: 0 };

  constructor(
    private readonly limitMs: number,
    private readonly maxBytes: number,
    /** cancel frees an answer: resets its stream (CANCEL). */
    private readonly cancel: (answer: A) => void,
  ) {}

  /**
   * sweep looks at the open answers of every connection at `now` (ms),
   * cancels those the time or the byte limit says, and tells whether any
   * answer it kept waits unsent (for the next sweep to look at again).
   */
  sweep(connections: Iterable<Iterable<A>>, now: number): boolean {
    const holders: { unsent: A[]; bytes: number }[] = [];
    let total = 0;
    for (const answers of connections) {
      const unsent: A[] = [];
      let bytes = 0;
      for (const answer of answers) {
        if (!answer.writableEnded || answer.writableFinished) continue;
        const since = this.seen.get(answer);
        if (since === undefined) this.seen.set(answer, now);
        else if (now - since >= this.limitMs) {
          this.cancel(answer);
          this.cancelled.time++;
          continue;
        }
        unsent.push(answer);
        bytes += answer.writableLength;
      }
      if (unsent.length === 0) continue;
      holders.push({ unsent, bytes });
      total += bytes;
    }
    if (total <= this.maxBytes) return holders.length > 0;
    holders.sort((a, b) => b.bytes - a.bytes);
    let kept = holders.length;
    for (const { unsent, bytes } of holders) {
      if (total <= this.maxBytes) break;
      for (const answer of unsent) this.cancel(answer);
      this.cancelled.bytes += unsent.length;
      total -= bytes;
      kept--;
    }
    return kept > 0;
  }
}
