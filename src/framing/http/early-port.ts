import * as net from "node:net";

/** PORT_RETRY_MS is how often bind tries again for a port another process holds. */
const PORT_RETRY_MS = 50;

/**
 * EarlyPort is the server's port, bound first thing at start, before the
 * rest of the server is loaded: a restarted server accepts connections
 * within a few hundred milliseconds, and a client's connection waits
 * instead of being refused. Connections accepted before a listener takes
 * the port over (handTo) wait, not read, and are handed over in order.
 */
export class EarlyPort {
  private readonly waiting = new Set<net.Socket>();
  private take: ((socket: net.Socket) => void) | undefined;

  private constructor(
    readonly server: net.Server,
    readonly port: number,
  ) {}

  /**
   * bind listens on host:port (0: any free port); maxConnections bounds the
   * connections at once (more are closed as they come). While another
   * process holds the port (a restart's previous one, still draining its
   * calls) it tries again every PORT_RETRY_MS for up to waitMs, telling
   * `waiting` once.
   */
  static async bind(host: string, port: number, maxConnections: number, waitMs = 0, waiting?: () => void): Promise<EarlyPort> {
    const deadline = performance.now() + waitMs;
    for (let told = false; ; told = true) {
      const server = net.createServer({ pauseOnConnect: true, noDelay: true });
      server.maxConnections = maxConnections;
      try {
        await listenOn(server, host, port);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== "EADDRINUSE" || performance.now() >= deadline) throw error;
        if (!told) waiting?.();
        await new Promise((resolve) => setTimeout(resolve, PORT_RETRY_MS));
        continue;
      }
      const early = new EarlyPort(server, (server.address() as net.AddressInfo).port);
      server.on("connection", (socket) => early.accept(socket));
      return early;
    }
  }

  /** handTo gives every connection, those that waited first, to `take`. */
  handTo(take: (socket: net.Socket) => void): void {
    this.take = take;
    for (const socket of this.waiting) take(socket);
    this.waiting.clear();
  }

  /** close stops accepting; it resolves once the connections the port accepted are all closed (Node's server.close). */
  close(): Promise<void> {
    for (const socket of this.waiting) socket.destroy();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }

  private accept(socket: net.Socket): void {
    if (this.take !== undefined) {
      this.take(socket);
      return;
    }
    this.waiting.add(socket);
    socket.once("close", () => this.waiting.delete(socket));
  }
}

/** listenOn listens on host:port, or rejects with the listen error (EADDRINUSE: another process holds it). */
function listenOn(server: net.Server, host: string, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      server.off("error", reject);
      resolve();
    });
  });
}
