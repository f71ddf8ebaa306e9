import { LEFT_PING_MS } from "../protocol/ping-within.js";
import { createLeanGrpcTransport, type LeanGrpcOptions, type LeanGrpcTransport } from "./lean-grpc-transport.js";

/**
 * LeanTransports keeps one lean gRPC transport (one multiplexed HTTP/2
 * connection, made on first use) per server, each sending `header` on
 * every call: how a relay reaches its upstream and a member the other
 * shards' leaders.
 */
export class LeanTransports {
  private readonly transports = new Map<string, LeanGrpcTransport>();

  constructor(private readonly options: Pick<LeanGrpcOptions, "tls" | "header" | "pingMs" | "heldPingMs">) {}

  /** of is the transport to `url`. */
  of(url: string): LeanGrpcTransport {
    let transport = this.transports.get(url);
    if (transport === undefined) {
      transport = createLeanGrpcTransport({ baseUrl: url, ...this.options });
      this.transports.set(url, transport);
    }
    return transport;
  }

  /**
   * left checks the connection to `url`, which calls just left for a new
   * leader: unless it answers a PING within LEFT_PING_MS (counted from the
   * PING sent for a call held there, if one is on its way), it is closed
   * and the calls held on it go again, to the new leader. `silent`: the server
   * already left a PING unanswered as long (a relay's health watch found
   * it so), and the connection is closed at once.
   */
  left(url: string, silent = false): void {
    const transport = this.transports.get(url);
    if (silent) transport?.drop();
    else transport?.check(LEFT_PING_MS);
  }

  /** close closes every connection. */
  close(): void {
    for (const transport of this.transports.values()) transport.close();
  }
}

/** callHeader is the header of calls that carry `token` (`authorization: Bearer`) and `more`. */
export function callHeader(token: string | undefined, more: Readonly<Record<string, string>> = {}): Record<string, string> {
  return token === undefined ? { ...more } : { authorization: `Bearer ${token}`, ...more };
}
