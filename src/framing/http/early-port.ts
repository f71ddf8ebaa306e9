import * as net from "node:net";
import { handOver, Successor } from "./port-handover.js";

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
  private closed: Promise<void> | undefined;

  private constructor(
    readonly server: net.Server,
    readonly host: string,
    readonly port: number,
    /** asked is the port asked for: 0 (any free one) is one no other process waits for. */
    private readonly asked: number,
  ) {}

  /**
   * bind listens on host:port (0: any free port); maxConnections bounds the
   * connections at once (more are closed as they come). While another
   * process holds the port (a restart's previous one, still draining its
   * calls) it tries again every PORT_RETRY_MS for up to waitMs, telling
   * `waiting` once; meanwhile it waits as the port's Successor, so that the
   * holder, stopping, hands the port over (handOver) and it binds at once.
   */
  static async bind(host: string, port: number, maxConnections: number, waitMs = 0, waiting?: () => void): Promise<EarlyPort> {
    const deadline = performance.now() + waitMs;
    let successor: Successor | undefined;
    let wake: (() => void) | undefined;
    // Once the holder said it freed the port, bind is tried at once and then every millisecond for a while: its socket may close a moment later.
    let hurry = 0;
    try {
      for (let told = false; ; told = true) {
        const server = net.createServer({ pauseOnConnect: true, noDelay: true });
        server.maxConnections = maxConnections;
        try {
          await listenOn(server, host, port);
        } catch (error) {
          if ((error as NodeJS.ErrnoException).code !== "EADDRINUSE" || performance.now() >= deadline) throw error;
          if (!told) {
            successor = await Successor.wait(host, port, () => {
              hurry = 100;
              wake?.();
            });
            waiting?.(); // once it waits as the successor: a holder stopped from now on hands the port over
          }
          await new Promise<void>((resolve) => {
            wake = resolve;
            setTimeout(resolve, hurry > 0 ? (hurry--, 1) : PORT_RETRY_MS);
          });
          continue;
        }
        successor?.bound();
        successor = undefined;
        const early = new EarlyPort(server, host, (server.address() as net.AddressInfo).port, port);
        server.on("connection", (socket) => early.accept(socket));
        return early;
      }
    } finally {
      successor?.close();
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
    if (this.closed !== undefined) return this.closed;
    for (const socket of this.waiting) socket.destroy();
    this.closed = new Promise((resolve) => this.server.close(() => resolve()));
    return this.closed;
  }

  /**
   * handOver closes the port for the process waiting to bind it, if one
   * is (a DaemonSet's surge: port-handover.ts), and resolves true once that
   * one took it; false, the port still open, when none waits.
   */
  handOver(): Promise<boolean> {
    if (this.asked === 0) return Promise.resolve(false);
    return handOver(this.host, this.port, () => void this.close());
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
