import * as net from "node:net";

/** HANDOVER_MS bounds the holder's wait for its successor to take the port it freed: past it, it closes its connections anyway. */
const HANDOVER_MS = 1_000;

/** RELEASED and BOUND are the two messages of a hand-over: the holder freed the port; the successor took it. */
const RELEASED = "released\n";
const BOUND = "bound\n";

/**
 * handoverName is where a process waiting for host:port says so: an
 * abstract Unix socket (Linux), one per network namespace and no file, so
 * that the pods of a DaemonSet on the node's network, or the processes of
 * one host, find each other and no one else.
 */
function handoverName(host: string, port: number): string {
  return `\0hf3fs-metadata-port-${host}-${port}`;
}

/**
 * Successor is the side of a process that waits to bind a port another
 * process holds (a DaemonSet's surge starts the new relay before the old
 * one stops): it listens at the port's hand-over name until it took the
 * port, hears the holder say it freed it (`released`: bind now), and tells
 * it once it is bound (`bound`), so that the holder closes its clients'
 * connections only then and they reconnect to a port that is taken.
 */
export class Successor {
  private readonly holders = new Set<net.Socket>();

  private constructor(private readonly server: net.Server) {}

  /** wait listens at host:port's hand-over name; undefined when another process already does (it is the successor). */
  static async wait(host: string, port: number, released: () => void): Promise<Successor | undefined> {
    const server = net.createServer();
    const successor = new Successor(server);
    server.on("connection", (holder) => {
      successor.holders.add(holder);
      holder.on("error", () => undefined);
      holder.once("close", () => successor.holders.delete(holder));
      let heard = "";
      holder.on("data", (chunk) => {
        heard += chunk;
        if (heard.includes(RELEASED)) released();
      });
    });
    const listening = await new Promise<boolean>((resolve) => {
      server.once("error", () => resolve(false));
      server.listen(handoverName(host, port), () => resolve(true));
    });
    if (!listening) return undefined;
    server.on("error", () => undefined); // a failed accept at its name costs the hand-over, never the process
    server.unref();
    return successor;
  }

  /** bound tells every holder that this process took the port, and stops listening at its name. */
  bound(): void {
    for (const holder of this.holders) holder.end(BOUND);
    this.server.close();
  }

  /** close stops listening at its name (this process gave up waiting). */
  close(): void {
    for (const holder of this.holders) holder.destroy();
    this.server.close();
  }
}

/**
 * handOver frees the port host:port for the process waiting for it, if
 * one is (Successor): it calls `release` (which stops accepting on the
 * port), tells the successor, and resolves true once the successor took
 * the port, or after HANDOVER_MS; false, having released nothing, when
 * none waits.
 */
export async function handOver(host: string, port: number, release: () => void): Promise<boolean> {
  const successor = await new Promise<net.Socket | undefined>((resolve) => {
    const socket = net.connect(handoverName(host, port));
    socket.once("connect", () => resolve(socket));
    socket.once("error", () => resolve(undefined));
  });
  if (successor === undefined) return false;
  release();
  await new Promise<void>((resolve) => {
    let heard = "";
    const done = () => {
      clearTimeout(timer);
      successor.destroy();
      resolve();
    };
    const timer = setTimeout(done, HANDOVER_MS);
    successor.on("data", (chunk) => {
      heard += chunk;
      if (heard.includes(BOUND)) done();
    });
    successor.once("close", done);
    successor.on("error", () => undefined);
    successor.write(RELEASED);
  });
  return true;
}
