import type { IKeyValue, WatchBuilder, Watcher } from "etcd3";

/** OPEN_MS bounds the wait for etcd to confirm a new watch; CLOSE_MS the wait for it to confirm a cancel. */
const OPEN_MS = 5_000;
const CLOSE_MS = 1_000;

/** WatchEvents are what a watch hears: puts and deletes of its keys, and its end (an error, or a lost stream). */
export interface WatchEvents {
  put?(kv: IKeyValue): void;
  delete?(kv: IKeyValue): void;
  /** ended hears why the watch can no longer be trusted to deliver every event. */
  ended(error: Error): void;
}

/**
 * watch opens a watch with its handlers attached before etcd confirms it
 * (the package's create() attaches them after, so events that arrive with
 * the confirmation could be missed), and resolves with a close function.
 * Every wait on etcd's watch stream is bounded: the package multiplexes
 * all watches on one stream, and a create or cancel whose answer never
 * comes would otherwise hang the member. A watch that was disconnected is
 * ended too, so the caller reads the log again rather than trust the
 * package's reconnection.
 */
export async function watch(builder: WatchBuilder, events: WatchEvents): Promise<() => Promise<void>> {
  // watcher() attaches without waiting for etcd's confirmation (create() is that, plus the wait).
  const watcher: Watcher = builder.watcher();
  let open = true;
  const guard = (handle: ((kv: IKeyValue) => void) | undefined) => (kv: IKeyValue) => {
    if (!open || handle === undefined) return;
    try {
      handle(kv);
    } catch (error) {
      end(error as Error);
    }
  };
  const end = (error: Error) => {
    if (!open) return;
    open = false;
    events.ended(error);
  };
  watcher.on("put", guard(events.put));
  watcher.on("delete", guard(events.delete));
  watcher.on("error", (error: Error) => end(error));
  watcher.on("disconnected", (error: Error) => end(error));
  const close = async () => {
    open = false;
    await bounded(
      watcher.cancel().catch(() => undefined),
      CLOSE_MS,
    );
  };
  const confirmed = await bounded(
    new Promise<boolean>((resolve) => {
      watcher.once("connected", () => resolve(true));
      watcher.once("error", () => resolve(false));
    }),
    OPEN_MS,
  );
  if (confirmed !== true) {
    await close();
    throw new Error(`etcd did not open a watch within ${OPEN_MS} ms`);
  }
  return close;
}

/** bounded resolves with the promise's value, or with undefined after ms. */
function bounded<T>(promise: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<undefined>((resolve) => {
    timer = setTimeout(() => resolve(undefined), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/**
 * isOrphanWatchResponse recognizes the error the etcd3 package throws, as
 * an unhandled rejection, when etcd answers for a watch the package has
 * already forgotten (one just canceled): "Failed to find watcher for
 * IWatchResponse". It throws before it changes anything, and the answer
 * was for nobody, so it is harmless; unrecognized, it crashed a member of
 * a loaded test cluster.
 */
export function isOrphanWatchResponse(reason: unknown): boolean {
  return reason instanceof Error && reason.message.startsWith("Failed to find watcher for IWatchResponse");
}
