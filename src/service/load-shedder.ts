import { MetadataError, Reason } from "../core/index.js";

/** LagSampler gives the event loop's current lag in ms: how late a timer due now fired. */
export type LagSampler = () => number;

/**
 * LoadShedder says when the server is overloaded: its event loop fell
 * behind by more than thresholdMs, until the lag is back under half of it
 * (hysteresis, so it does not flap). While overloaded the edge refuses new
 * calls with UNAVAILABLE REASON_OVERLOADED (clients retry with backoff)
 * instead of queueing them without bound; calls already accepted finish.
 */
export class LoadShedder {
  private overloadedNow = false;
  /** shedCalls counts the calls refused as overloaded since the start. */
  shedCalls = 0;

  /** refusal is the one error every shed call gets (made once: a flood of shed calls makes no error each). */
  private readonly refusal: MetadataError;

  constructor(
    readonly thresholdMs: number,
    private readonly sampleLag: LagSampler,
  ) {
    this.refusal = new MetadataError(Reason.OVERLOADED, `the server is overloaded (its event loop is more than ${thresholdMs} ms behind); retry with backoff`);
  }

  /** overloaded reads the lag and says whether new calls are shed. */
  get overloaded(): boolean {
    const lag = this.sampleLag();
    if (lag > this.thresholdMs) this.overloadedNow = true;
    else if (lag < this.thresholdMs / 2) this.overloadedNow = false;
    return this.overloadedNow;
  }

  /** admit throws OVERLOADED, counting the shed call, while overloaded. */
  admit(): void {
    if (!this.overloaded) return;
    this.shedCalls++;
    throw this.refusal;
  }
}

/**
 * loopLagSampler measures the event loop's lag with a timer every
 * intervalMs: each firing notes how late it came. The lag read is the
 * latest firing's, or, when the timer is overdue now (the loop is busy
 * with what was queued), how overdue it is. The timer does not keep the
 * process alive; stop() ends it.
 */
export function loopLagSampler(intervalMs = 10): { sample: LagSampler; stop(): void } {
  let due = performance.now() + intervalMs;
  let lastLag = 0;
  const timer = setInterval(() => {
    const now = performance.now();
    lastLag = Math.max(0, now - due);
    due = now + intervalMs;
  }, intervalMs);
  timer.unref();
  return {
    sample: () => Math.max(lastLag, performance.now() - due),
    stop: () => clearInterval(timer),
  };
}
