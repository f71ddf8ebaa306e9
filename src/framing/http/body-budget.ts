import { Code, ConnectError } from "@connectrpc/connect";

/**
 * BodyBudget bounds the request bytes the server holds at once for calls
 * not yet served (bodies being read, and read ones that wait to be decoded
 * and run): per connection and for the whole server. Without it, one
 * connection sending large bodies on many streams, never ending them, grew
 * the server to gigabytes in seconds.
 */
export class BodyBudget {
  private total = 0;
  private readonly perConnection = new Map<object, number>();

  constructor(
    /** maxBytes bounds the bytes buffered by all bodies being read. */
    readonly maxBytes: number,
    /** maxBytesPerConnection bounds those of one connection's bodies. */
    readonly maxBytesPerConnection: number,
  ) {}

  /** take counts `bytes` more for `connection`, or throws RESOURCE_EXHAUSTED (counting nothing) when that passes a bound. */
  take(connection: object, bytes: number): void {
    const held = this.perConnection.get(connection) ?? 0;
    if (held + bytes > this.maxBytesPerConnection) {
      throw new ConnectError(
        `this connection's unfinished requests hold more than ${this.maxBytesPerConnection} bytes; finish or cancel some first`,
        Code.ResourceExhausted,
      );
    }
    if (this.total + bytes > this.maxBytes) {
      throw new ConnectError(`the server holds more than ${this.maxBytes} bytes of unfinished requests; retry later`, Code.ResourceExhausted);
    }
    this.perConnection.set(connection, held + bytes);
    this.total += bytes;
  }

  /** give returns bytes that `connection` took. */
  give(connection: object, bytes: number): void {
    if (bytes === 0) return;
    const held = (this.perConnection.get(connection) ?? 0) - bytes;
    if (held > 0) this.perConnection.set(connection, held);
    else this.perConnection.delete(connection);
    this.total -= bytes;
  }

  /** room is how many more bytes `connection` may take now. */
  room(connection: object): number {
    return Math.max(0, Math.min(this.maxBytesPerConnection - (this.perConnection.get(connection) ?? 0), this.maxBytes - this.total));
  }

  /** heldBytes is what all bodies being read hold now. */
  get heldBytes(): number {
    return this.total;
  }
}
