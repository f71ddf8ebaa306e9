import { type OptionsOf, optionTable } from "../../core/index.js";

/** LISTENER_OPTIONS say where the server listens and bound its connections (DualProtocolListener). */
export const LISTENER_OPTIONS = optionTable({
  host: { flag: "host", kind: "string", default: "127.0.0.1", help: "address to listen on" },
  port: { flag: "port", kind: "integer", max: 65_535, default: 18000, help: "TCP port (0: any free port)" },
  maxConnections: {
    flag: "max-connections",
    kind: "integer",
    min: 1,
    default: 4_096,
    help: "connections at once at most; more are closed as they come",
  },
  /**
   * One socket read brings at most this many new calls per connection, which bounds how long a
   * flood of tiny calls holds the event loop; 100 is the least RFC 9113 recommends.
   */
  maxStreamsPerConnection: {
    flag: "max-streams-per-connection",
    kind: "integer",
    min: 1,
    default: 100,
    help: "concurrent HTTP/2 streams (calls) per connection at most",
  },
  idleTimeoutMs: { flag: "idle-timeout", kind: "duration", min: 1, default: 300_000, help: "a connection without a call in flight this long is closed" },
  http2KeepaliveMs: {
    flag: "http2-keepalive",
    kind: "duration",
    min: 1,
    default: 10_000,
    help: "an HTTP/2 connection silent this long is pinged, and closed unless it answers within as long again",
  },
  shutdownTimeoutMs: { flag: "shutdown-timeout", kind: "duration", default: 10_000, help: "how long shutdown waits for calls in flight" },
});

/** ListenerOptions say where the server listens and bound its connections (LISTENER_OPTIONS). */
export type ListenerOptions = OptionsOf<typeof LISTENER_OPTIONS>;
