import type { Etcd3, IKeyValue, WatchBuilder, Watcher } from "etcd3";

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

/** WatchNotOpened says etcd did not confirm a new watch in time: the client's watch stream may be wedged (Watches). */
export class WatchNotOpened extends Error {
  override name = "WatchNotOpened";
}

/**
 * watch opens a watch with its handlers attached before etcd confirms it
 * (the package's create() attaches them after, so events that arrive with
 * the confirmation could be missed), and resolves with a close function.
 * Every wait on etcd's watch stream is bounded: the package multiplexes
 * all watches on one stream, and a create or cancel whose answer never
 * comes would otherwise hang the member. A watch that was disconnected is
 * ended too, so the caller reads the log again rather than trust the
 * package's reconnection. A watch etcd canceled (as one that starts at a
 * compacted revision) is not canceled again on close: the package has
 * forgotten it, throws on etcd's answer to that cancel, and its stream
 * then answers no further create.
 */
export async function watch(builder: WatchBuilder, events: WatchEvents, openMs = OPEN_MS): Promise<() => Promise<void>> {
  // watcher() attaches without waiting for etcd's confirmation (create() is that, plus the wait).
  const watcher: Watcher = builder.watcher();
  let open = true;
  let canceledByEtcd = false;
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
  watcher.on("error", (error: Error) => {
    canceledByEtcd = true;
    end(error);
  });
  watcher.on("disconnected", (error: Error) => end(error));
  const close = async () => {
    open = false;
    if (canceledByEtcd) return;
    await bounded(
      watcher.cancel().catch(() => undefined),
      CLOSE_MS,
    );
  };
  const opened = await bounded(
    new Promise<true | Error>((resolve) => {
      watcher.once("connected", () => resolve(true));
      watcher.once("error", (error: Error) => resolve(error));
    }),
    openMs,
  );
  if (opened !== true) {
    await close();
    throw opened ?? new WatchNotOpened(`etcd did not open a watch within ${openMs} ms`);
  }
  return close;
}

/**
 * Watches opens a member's watches on an etcd client of their own, made
 * anew when a watch does not open in time: the etcd3 package multiplexes
 * every watch of a client on one stream, and a stream it has wedged (it
 * threw on an answer it did not expect, and answers no create after) stays
 * so for the client's life. Closing the old client ends the watches still
 * open on it (`ended`), and their callers watch again.
 */
export class Watches {
  private client: Etcd3 | undefined;

  constructor(
    private readonly connect: () => Etcd3,
    private readonly openMs = OPEN_MS,
  ) {}

  /** open opens the watch `build` makes on the current client (see watch); one that does not open in time renews the client. */
  async open(build: (client: Etcd3) => WatchBuilder, events: WatchEvents): Promise<() => Promise<void>> {
    this.client ??= this.connect();
    const client = this.client;
    try {
      return await watch(build(client), events, this.openMs);
    } catch (error) {
      if (error instanceof WatchNotOpened && this.client === client) {
        this.client = undefined;
        client.close();
      }
      throw error;
    }
  }

  close(): void {
    this.client?.close();
    this.client = undefined;
  }
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
 * already forgotten: "Failed to find watcher for IWatchResponse".
 * Unrecognized, it crashed a member of a loaded test cluster. It is not
 * harmless: the package's watch stream may open no watch after it. watch()
 * no longer cancels a watch etcd canceled (the cause seen), and Watches
 * renews a client whose watches stop opening, whatever the cause.
 */
export function isOrphanWatchResponse(reason: unknown): boolean {
  return reason instanceof Error && reason.message.startsWith("Failed to find watcher for IWatchResponse");
}

/** watchAfter makes a watch begin at the revision after `revision`, the one a read answered at: it hears every change since that read, and none the read saw. */
export function watchAfter(builder: WatchBuilder, revision: string): WatchBuilder {
  return builder.startRevision(String(BigInt(revision) + 1n));
}
