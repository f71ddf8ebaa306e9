import type { MetadataState, StateReads } from "../core/index.js";
import type { Store } from "../store/store.js";

/** Ledger is the state with the store that makes its changes durable. */
export interface Ledger {
  readonly state: MetadataState;
  readonly store: Store;
  /** reads are what reads run on: the state, or a standby's replayed one when it answers reads itself (StandbyReads); undefined: the state. */
  readonly reads?: () => StateReads;
}

/**
 * commit makes every change the state made so far durable. Calls that
 * changed nothing still wait, so no reply is built from state the store
 * does not have yet.
 */
export function commit(ledger: Ledger): Promise<void> {
  return ledger.store.commit(ledger.state.takeChanges());
}
