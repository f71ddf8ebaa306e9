/**
 * Notifier wakes those who wait for the next change of a piece of state
 * (Lifecycle, Leadership): `next` resolves at the next `notify`, or when
 * its signal aborts, and leaves no listener behind either way.
 */
export class Notifier {
  private readonly waiters = new Set<() => void>();

  /** next resolves at the next change, or at once when signal aborted, or when it aborts. */
  next(signal: AbortSignal): Promise<void> {
    if (signal.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        this.waiters.delete(done);
        signal.removeEventListener("abort", done);
        resolve();
      };
      this.waiters.add(done);
      signal.addEventListener("abort", done);
    });
  }

  /** notify wakes every waiter. */
  notify(): void {
    if (this.waiters.size === 0) return;
    for (const waiter of [...this.waiters]) waiter();
  }
}

/** Notifying is a piece of state whose changes can be awaited (Lifecycle, Leadership). */
export interface Notifying {
  next(signal: AbortSignal): Promise<void>;
}

/** nextNotice resolves at the next change of any of `sources` (undefined ones are skipped), or when signal aborts, and leaves no listener behind on any of them. */
export async function nextNotice(sources: readonly (Notifying | undefined)[], signal: AbortSignal): Promise<void> {
  if (signal.aborted) return;
  const turn = new AbortController();
  const end = () => turn.abort();
  signal.addEventListener("abort", end, { once: true });
  try {
    await Promise.race(sources.flatMap((source) => (source === undefined ? [] : [source.next(turn.signal)])));
  } finally {
    turn.abort();
    signal.removeEventListener("abort", end);
  }
}
