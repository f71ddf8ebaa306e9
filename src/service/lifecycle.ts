import type { MetadataError } from "../core/index.js";
import { Notifier } from "./notifier.js";

/**
 * Lifecycle is whether the server accepts calls. A server that listens
 * before its state is loaded is first `starting` (calls wait at the edge,
 * health says NOT_SERVING); it accepts calls once `started`, until it
 * refuses them for good, because it is shutting down, its store failed, or
 * loading failed. A server told to stop first `drains`: health says
 * NOT_SERVING and its watches end, but the calls its open connections still
 * send are served, so that a restart costs no client an error. Health
 * checks and held calls watch it.
 */
export class Lifecycle {
  private current: MetadataError | undefined;
  private loading: boolean;
  private drained = false;
  private readonly notifier = new Notifier();

  /** starting: the server listens before it has loaded its state (started() ends that). */
  constructor(starting = false) {
    this.loading = starting;
  }

  /** refusal is the error every new call gets once the server stopped accepting; undefined while it accepts. */
  get refusal(): MetadataError | undefined {
    return this.current;
  }

  /** starting is true from a start that listens first until the state is loaded (or loading failed). */
  get starting(): boolean {
    return this.loading && this.current === undefined;
  }

  /** started says the state is loaded: calls held meanwhile go on. */
  started(): void {
    if (!this.loading) return;
    this.loading = false;
    this.notifier.notify();
  }

  /** draining is true once the server is told to stop (drain) or refuses calls: it is no longer ready, though it may still serve. */
  get draining(): boolean {
    return this.drained || this.current !== undefined;
  }

  /** drain says the server is stopping: no longer ready, while it serves the calls its open connections send. */
  drain(): void {
    if (this.drained) return;
    this.drained = true;
    this.notifier.notify();
  }

  /** refuse stops accepting calls with `error` (the first refusal wins) and tells the watchers. */
  refuse(error: MetadataError): void {
    if (this.current !== undefined) return;
    this.current = error;
    this.notifier.notify();
  }

  /** next resolves at the next change (started, refused), or when signal aborts. */
  next(signal: AbortSignal): Promise<void> {
    return this.notifier.next(signal);
  }

  /** stopping resolves when the server drains or stops accepting, or when signal aborts. */
  async stopping(signal: AbortSignal): Promise<void> {
    while (!this.draining && !signal.aborted) await this.next(signal);
  }
}
