import type { Change } from "../core/index.js";

/**
 * Store keeps the state's changes. The state machine never sees it: the
 * service takes the changes of each call from the state and commits them
 * before it replies (write-ahead rule).
 */
export interface Store {
  /** serverId identifies the lifetime of the stored state: the same across restarts on the same data, new when the state is new. */
  readonly serverId: string;
  /**
   * commit makes `changes` durable after every earlier commit. It resolves
   * once they and all earlier ones are durable — so `commit([])` waits for
   * what is in flight. It rejects with a MetadataError STORE_UNAVAILABLE
   * when the store failed; the store is then unusable.
   */
  commit(changes: readonly Change[]): Promise<void>;
  /** failed resolves with the error of the first failed commit; the store refuses every commit after it. */
  readonly failed: Promise<Error>;
  /** close waits for pending commits and releases the store. */
  close(): Promise<void>;
}

/** withCommit is `store` with its commit replaced by `commit` (which calls the store's own): for measuring commits, or for work that follows them. */
export function withCommit(store: Store, commit: (changes: readonly Change[]) => Promise<void>): Store {
  return {
    get serverId() {
      return store.serverId;
    },
    failed: store.failed,
    close: () => store.close(),
    commit,
  };
}
