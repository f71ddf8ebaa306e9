import { createHash } from "node:crypto";
import { realpathSync } from "node:fs";
import { createServer, type Server } from "node:net";

/**
 * DataDirLock makes sure one server at a time uses a data dir. It listens
 * on a Linux abstract Unix socket named after the data dir's real path: the
 * kernel frees it when the process dies, even by kill -9, so there is no
 * stale lock to clean up, and no file is written into the data dir.
 */
export class DataDirLock {
  private constructor(private readonly server: Server) {}

  /** acquire takes the lock of dir or throws naming the dir when another process holds it. */
  static async acquire(dir: string): Promise<DataDirLock> {
    const real = realpathSync(dir);
    const name = `\0hf3fs-metadata-${createHash("sha256").update(real).digest("hex").slice(0, 32)}`;
    const server = createServer((socket) => socket.destroy());
    await new Promise<void>((resolve, reject) => {
      server.once("error", (error: NodeJS.ErrnoException) =>
        reject(
          error.code === "EADDRINUSE"
            ? new Error(`data dir ${real} is locked: another hf3fs-metadata server is using it`)
            : new Error(`cannot lock data dir ${real}: ${error.message}`),
        ),
      );
      server.listen(name, () => resolve());
    });
    server.unref();
    return new DataDirLock(server);
  }

  /** release gives the lock up. */
  release(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}
