import type * as http2 from "node:http2";
import { LEFT_PING_MS, pingWithin } from "./ping-within.js";

/** HELD_PING_MS is how long a call may wait unanswered, at least, before its connection is PINGed. */
export const HELD_PING_MS = 250;

/**
 * HeldCalls PINGs a connection whose oldest call has waited HELD_PING_MS
 * or more, each HELD_PING_MS while calls wait. The PING decides nothing
 * itself; it is on its way when the server is found to have left the lead
 * (pingWithin joins it), so a server paused through its failover, silent
 * since about when its calls began to wait, is given up as the next leader
 * comes instead of LEFT_PING_MS after. A live server answers it at once.
 */
export class HeldCalls {
  /** waiting are the calls on their way, oldest first (a Set keeps the order they came in). */
  private readonly waiting = new Set<object>();
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly session: http2.ClientHttp2Session,
    private readonly everyMs = HELD_PING_MS,
  ) {}

  /** add counts a call sent on the session until `done` is called for it. */
  add(call: object): void {
    this.waiting.add(call);
    if (this.timer === undefined) this.watch();
  }

  /** done counts a call no more (answered, failed or closed). */
  done(call: object): void {
    this.waiting.delete(call);
    if (this.waiting.size > 0 || this.timer === undefined) return;
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  /** watch looks again in everyMs: if the oldest call now is still waiting then, the connection is PINGed. */
  private watch(): void {
    const oldest = this.waiting.values().next().value;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      if (this.session.closed || this.session.destroyed) return;
      if (oldest !== undefined && this.waiting.has(oldest)) pingWithin(this.session, LEFT_PING_MS, () => undefined);
      if (this.waiting.size > 0) this.watch();
    }, this.everyMs);
    this.timer.unref();
  }
}
