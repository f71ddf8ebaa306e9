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
    /** successors is whether a next process may wait for this port (not an ephemeral one, nor a socket systemd keeps). */
    private readonly successors: boolean,
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
        return EarlyPort.serving(server, host, port !== 0);
      }
    } finally {
      successor?.close();
    }
  }

  /**
   * adopt listens on the socket of file descriptor `fd`, one bound and
   * listening already: systemd's, passed to a socket-activated process.
   * systemd keeps it open across restarts, so that a connection made while
   * no process accepts waits in its backlog instead of being refused.
   */
  static async adopt(fd: number, maxConnections: number): Promise<EarlyPort> {
    const server = net.createServer({ pauseOnConnect: true, noDelay: true });
    server.maxConnections = maxConnections;
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen({ fd }, () => {
        server.off("error", reject);
        resolve();
      });
    });
    const address = server.address();
    if (address === null || typeof address === "string") {
      server.close();
      throw new Error(
        `the socket passed as file descriptor ${fd} is not a TCP socket (${address}): give the socket unit a ListenStream= of an address and port`,
      );
    }
    return EarlyPort.serving(server, address.address, false);
  }

  /** serving is an EarlyPort of a listening server; its connections wait for handTo. */
  private static serving(server: net.Server, host: string, successors: boolean): EarlyPort {
    const early = new EarlyPort(server, host, (server.address() as net.AddressInfo).port, successors);
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
    if (!this.successors) return Promise.resolve(false);
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
