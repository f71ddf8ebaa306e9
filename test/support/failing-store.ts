import type { Change } from "../../src/core/change.js";
import { MetadataError, Reason } from "../../src/core/errors.js";
import type { Store } from "../../src/store/store.js";

/** FailingStore wraps a store and, once told to, fails every commit without writing, as a full or broken disk would. */
export class FailingStore implements Store {
  private broken: MetadataError | undefined;
  private onFailure!: (error: Error) => void;
  readonly failed = new Promise<Error>((resolve) => (this.onFailure = resolve));

  constructor(readonly inner: Store) {}

  get serverId(): string {
    return this.inner.serverId;
  }

  /** breakNow makes this and every later commit fail. */
  breakNow(): void {
    this.broken = new MetadataError(Reason.STORE_UNAVAILABLE, "simulated I/O error: ENOSPC");
  }

  commit(changes: readonly Change[]): Promise<void> {
    if (this.broken === undefined) return this.inner.commit(changes);
    this.onFailure(this.broken);
    return Promise.reject(this.broken);
  }

  close(): Promise<void> {
    return this.inner.close();
  }
}
