/**
 * LargeCallLane runs the steps of large calls (decode, core call, commit)
 * one call at a time, each step in an event-loop turn of its own, so that
 * the I/O of every other call is served between them. A step of a call of
 * 65,536 long keys holds the loop for a hundred milliseconds or more; run
 * back to back, and for several such calls at once, they held every other
 * client for seconds.
 */
export class LargeCallLane {
  private tail: Promise<unknown> = Promise.resolve();

  /** run starts `work` once the calls before it are done and the loop had a turn; work awaits `turn` between its steps. */
  run<T>(work: (turn: () => Promise<void>) => Promise<T>): Promise<T> {
    const result = this.tail.then(async () => {
      await otherCallsTurn();
      return work(otherCallsTurn);
    });
    this.tail = result.then(
      () => undefined,
      () => undefined,
    );
    return result;
  }
}

/** otherCallsTurn resolves after the event loop has served the I/O that is ready. */
function otherCallsTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
