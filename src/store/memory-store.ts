import { randomUUID } from "node:crypto";
import type { Change } from "../core/index.js";
import type { Store } from "./store.js";

const done = Promise.resolve();

/** MemoryStore keeps nothing: the state lives and dies with the process (`--in-memory`). */
export class MemoryStore implements Store {
  readonly serverId = randomUUID();
  /** failed never resolves: memory does not fail. */
  readonly failed = new Promise<Error>(() => {});

  commit(_changes: readonly Change[]): Promise<void> {
    return done;
  }

  close(): Promise<void> {
    return done;
  }
}
