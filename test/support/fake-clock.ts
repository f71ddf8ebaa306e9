import type { Clock } from "../../src/core/clock.js";

/** FakeClock is a Clock that moves only when a test advances it. */
export class FakeClock {
  constructor(public nowMs = 1_700_000_000_000) {}

  readonly clock: Clock = () => this.nowMs;

  advance(ms: number): void {
    this.nowMs += ms;
  }
}
