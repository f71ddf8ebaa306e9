import { withCommit } from "../store/store.js";
import { commit, type Ledger } from "./ledger.js";

/** EVICTION_STEP_KEYS bounds the keys one background step evicts: a call that arrives meanwhile waits for one step at most. */
export const EVICTION_STEP_KEYS = 256;

/**
 * BackgroundEviction runs MetadataState.evictAhead between calls, so that
 * writers find free pages instead of evicting inline: after a commit that
 * leaves a rank past the high watermark, it evicts a step at a time, each
 * step's evictions committed like a call's, until no rank is crowded. Steps
 * are scheduled with setImmediate, so the calls that arrived meanwhile run
 * first. It steps only while `admits` says the server serves calls
 * (started, not refused, leading its cluster).
 */
export class BackgroundEviction {
  /** ledger is the ledger to serve calls with: its commits are watched. */
  readonly ledger: Ledger;
  private scheduled = false;
  private closed = false;

  constructor(
    inner: Ledger,
    private readonly admits: () => boolean,
    private readonly stepKeys = EVICTION_STEP_KEYS,
  ) {
    const store = inner.store;
    const watched = withCommit(store, (changes) => {
      const done = store.commit(changes);
      this.poke();
      return done;
    });
    // The state is read at each use: a cluster member gets a new one each time it starts leading.
    this.ledger = {
      get state() {
        return inner.state;
      },
      store: watched,
    };
  }

  /** close stops stepping. */
  close(): void {
    this.closed = true;
  }

  /** poke schedules a step if a rank is crowded and none is scheduled. */
  private poke(): void {
    if (this.scheduled || this.closed || !this.ledger.state.evictionPending) return;
    this.scheduled = true;
    setImmediate(this.step);
  }

  private readonly step = (): void => {
    this.scheduled = false;
    if (this.closed || !this.admits()) return;
    this.ledger.state.evictAhead(this.stepKeys);
    // Its commit pokes the next step; a failure resolves the store's `failed`, which the server handles.
    commit(this.ledger).catch(() => undefined);
  };
}
