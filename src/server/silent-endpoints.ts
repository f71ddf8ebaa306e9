/** SILENT_MS is how long calls avoid an endpoint after a call to it ran out its deadline (as etcd-client.ts's breakers). */
export const SILENT_MS = 1_000;

/**
 * SilentEndpoints picks the endpoint of each call of the lean etcd client:
 * at random among those not silent, or among all when every one is. An
 * endpoint is silent for SILENT_MS after a call to it ran out its
 * deadline, unless a call sent to it later was answered. Evidence is
 * ordered by when calls were sent, not when they ended: while etcd elects
 * a leader every member holds its calls, and a follower's call sent before
 * the election runs out after the follower answers again; it must not
 * take the place of the paused leader, which alone stays silent.
 */
export class SilentEndpoints {
  private readonly answeredSent: number[];
  private readonly silentSent: number[];
  private readonly silentUntil: number[];

  constructor(
    readonly count: number,
    private readonly now: () => number = () => performance.now(),
    private readonly random: () => number = Math.random,
  ) {
    this.answeredSent = new Array<number>(count).fill(Number.NEGATIVE_INFINITY);
    this.silentSent = new Array<number>(count).fill(Number.NEGATIVE_INFINITY);
    this.silentUntil = new Array<number>(count).fill(0);
  }

  /** pick is the endpoint of the next call. */
  pick(): number {
    const open: number[] = [];
    for (let i = 0; i < this.count; i++) if (!this.silent(i)) open.push(i);
    const from = open.length > 0 ? open : Array.from({ length: this.count }, (_, i) => i);
    return from[Math.floor(this.random() * from.length)]!;
  }

  /** silent is true while `endpoint` is avoided. */
  silent(endpoint: number): boolean {
    return this.silentSent[endpoint]! > this.answeredSent[endpoint]! && this.now() < this.silentUntil[endpoint]!;
  }

  /** answered records an answer from `endpoint` to a call sent at `sentAt` (this clock's time). */
  answered(endpoint: number, sentAt: number): void {
    if (sentAt > this.answeredSent[endpoint]!) this.answeredSent[endpoint] = sentAt;
  }

  /** ranOut records that a call sent to `endpoint` at `sentAt` ran out its deadline unanswered. */
  ranOut(endpoint: number, sentAt: number): void {
    if (sentAt > this.silentSent[endpoint]!) this.silentSent[endpoint] = sentAt;
    this.silentUntil[endpoint] = this.now() + SILENT_MS;
  }
}
