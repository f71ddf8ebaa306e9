import type { MetadataError } from "../core/errors.js";
import { Changes } from "./state-changes.js";

/**
 * Lifecycle is whether the server accepts calls. A server that listens
 * before its state is loaded is first `starting` (calls wait at the edge,
 * health says NOT_SERVING); it accepts calls once `started`, until it
 * refuses them for good, because it is shutting down, its store failed, or
 * loading failed. Health checks and held calls watch it.
 */
export class Lifecycle {
  private current: MetadataError | undefined;
  private loading: boolean;
  private readonly changes = new Changes();

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
    this.changes.notify();
  }

  /** refuse stops accepting calls with `error` (the first refusal wins) and tells the watchers. */
  refuse(error: MetadataError): void {
    if (this.current !== undefined) return;
    this.current = error;
    this.changes.notify();
  }

  /** next resolves at the next change (started, refused), or when signal aborts. */
  next(signal: AbortSignal): Promise<void> {
    return this.changes.next(signal);
  }

  /** refused resolves when the server stops accepting, or when signal aborts. */
  async refused(signal: AbortSignal): Promise<void> {
    while (this.current === undefined && !signal.aborted) await this.next(signal);
  }
}
