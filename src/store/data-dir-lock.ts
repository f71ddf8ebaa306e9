import { createHash } from "node:crypto";
import { realpathSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";

/** RETRY_MS is how often a process waiting for a data dir's lock tries again. */
const RETRY_MS = 50;

/**
 * DataDirLock makes sure one server at a time uses a data dir. It listens
 * on a Linux abstract Unix socket named after the data dir's real path: the
 * kernel frees it when the process dies, even by kill -9, so there is no
 * stale lock to clean up, and no file is written into the data dir.
 */
export class DataDirLock {
  private constructor(private readonly server: Server) {}

  /**
   * acquire takes the lock of dir. While another process holds it, it tries
   * again for up to waitMs (a restarted server waits for the previous one to
   * finish its drain and exit; `waiting` is told once), then throws naming
   * the dir.
   */
  static async acquire(dir: string, waitMs = 0, waiting: () => void = () => {}): Promise<DataDirLock> {
    const real = realpathSync(dir);
    const name = `\0hf3fs-metadata-${createHash("sha256").update(real).digest("hex").slice(0, 32)}`;
    const deadline = Date.now() + waitMs;
    for (let tried = 0; ; tried++) {
      const server = await listenOn(name).catch((error: NodeJS.ErrnoException) => {
        if (error.code !== "EADDRINUSE") throw new Error(`cannot lock data dir ${real}: ${error.message}`);
        return undefined;
      });
      if (server !== undefined) return new DataDirLock(server);
      if (Date.now() >= deadline) {
        const waited = waitMs > 0 ? ` (waited ${waitMs} ms for it to stop)` : "";
        throw new Error(`data dir ${real} is locked: another hf3fs-metadata server is using it${waited}`);
      }
      if (tried === 0) waiting();
      await sleep(RETRY_MS);
    }
  }

  /** release gives the lock up. */
  release(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

/** listenOn listens on the abstract socket `name`, or rejects with the listen error (EADDRINUSE: another process holds it). */
function listenOn(name: string): Promise<Server> {
  const server = createServer((socket) => socket.destroy());
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(name, () => {
      server.off("error", reject);
      server.unref();
      resolve(server);
    });
  });
}
