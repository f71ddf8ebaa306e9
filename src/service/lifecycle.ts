import type { MetadataError } from "../core/errors.js";

/**
 * Lifecycle is whether the server accepts calls: from start (after
 * recovery) until it refuses them for good, because it is shutting down or
 * its store failed. Health checks watch it.
 */
export class Lifecycle {
  private current: MetadataError | undefined;
  private readonly listeners = new Set<() => void>();

  /** refusal is the error every new call gets once the server stopped accepting; undefined while it accepts. */
  get refusal(): MetadataError | undefined {
    return this.current;
  }

  /** refuse stops accepting calls with `error` (the first refusal wins) and tells the watchers. */
  refuse(error: MetadataError): void {
    if (this.current !== undefined) return;
    this.current = error;
    for (const listener of this.listeners) listener();
  }

  /** refused resolves when the server stops accepting, or when signal aborts. */
  refused(signal: AbortSignal): Promise<void> {
    if (this.current !== undefined || signal.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        this.listeners.delete(done);
        signal.removeEventListener("abort", done);
        resolve();
      };
      this.listeners.add(done);
      signal.addEventListener("abort", done);
    });
  }
}
