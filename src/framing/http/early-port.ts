import * as net from "node:net";

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

  /** bind listens on host:port (0: any free port); maxConnections bounds the connections at once (more are closed as they come). */
  static async bind(host: string, port: number, maxConnections: number): Promise<EarlyPort> {
    const server = net.createServer({ pauseOnConnect: true, noDelay: true });
    server.maxConnections = maxConnections;
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(port, host, () => {
        server.off("error", reject);
        resolve();
      });
    });
    const early = new EarlyPort(server, (server.address() as net.AddressInfo).port);
    server.on("connection", (socket) => early.accept(socket));
    return early;
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
