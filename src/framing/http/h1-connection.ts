import type * as http from "node:http";
import type * as net from "node:net";

/**
 * H1Connection is an HTTP/1.1 connection's calls: its answers not yet
 * finished, and whether it read bytes since its last answer ended (a call
 * begun, its request not yet whole): busy either way, idle otherwise.
 */
export class H1Connection {
  readonly answers = new Set<http.ServerResponse>();
  /** readAtRest is the connection's bytesRead when its last answer ended (0 before its first: its first bytes are a call's). */
  private readAtRest = 0;

  constructor(private readonly socket: net.Socket) {}

  /** busy is true while an answer is unfinished or bytes came since the last one ended. */
  get busy(): boolean {
    return this.answers.size > 0 || this.socket.bytesRead > this.readAtRest;
  }

  /** answered ends one of its answers. */
  answered(res: http.ServerResponse): void {
    this.answers.delete(res);
    if (this.answers.size === 0) this.readAtRest = this.socket.bytesRead;
  }
}
