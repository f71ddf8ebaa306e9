import type { Change } from "./change.js";
import type { Clock } from "./clock.js";
import { type Restoring, replayOne, restoring, takeOver } from "./recovery.js";
import { Registry } from "./registry.js";
import { MetadataState } from "./state.js";
import type { StateOptions } from "./state-options.js";
import { peekReads, type StateReads } from "./state-reads.js";

/**
 * ReplayState is a state that a hot standby keeps equal to the leader's, one
 * change of the leader's journal at a time. It cannot serve: it has no
 * commands, journals nothing and runs no deadlines. `takeOver` hands its
 * state over, ready to serve as after a restart (the restart terms), and
 * ends the replay.
 */
export class ReplayState {
  private registry: Registry | undefined;

  /**
   * @param clock the time source.
   * @param options the rules of the state it will serve (the leader's).
   * @param journaling whether the state it hands over records its changes.
   */
  constructor(clock: Clock, options: Partial<StateOptions> = {}, journaling = true) {
    this.registry = new Registry(clock, options, journaling);
    this.registry.journal.on = false; // the leader journaled these changes
  }

  /** restoring loads the state from its store first (as MetadataState.restoring), before it applies the log that follows. */
  restoring(): Restoring {
    return restoring(this.live());
  }

  /** apply applies one change of the leader's journal. */
  apply(change: Change): void {
    replayOne(this.live(), change);
  }

  /** reads reads the replayed state as it stands (a caught-up standby's answers), changing nothing; they throw once it was taken over. */
  readonly reads: StateReads = peekReads(() => this.live());

  /** takeOver ends the standby and returns its state, ready to serve. */
  takeOver(): MetadataState {
    const registry = this.live();
    this.registry = undefined;
    takeOver(registry);
    registry.journal.on = registry.journaling;
    return MetadataState.serving(registry);
  }

  private live(): Registry {
    if (this.registry === undefined) throw new Error("the replayed state was taken over");
    return this.registry;
  }
}
