import { type OptionsOf, optionTable } from "../../core/options.js";

/** LISTENER_OPTIONS say where the server listens and bound its connections (DualProtocolListener). */
export const LISTENER_OPTIONS = optionTable({
  host: { kind: "string", default: "127.0.0.1" },
  port: { kind: "integer", max: 65_535, default: 18000 },
  maxConnections: {
    kind: "integer",
    min: 1,
    default: 4_096,
  },
  /**
   * One socket read brings at most this many new calls per connection, which bounds how long a
   * flood of tiny calls holds the event loop; 100 is the least RFC 9113 recommends.
   */
  maxStreamsPerConnection: {
    kind: "integer",
    min: 1,
    default: 100,
  },
  idleTimeoutMs: { kind: "duration", min: 1, default: 300_000 },
  http2KeepaliveMs: {
    kind: "duration",
    min: 1,
    default: 10_000,
  },
  shutdownTimeoutMs: { kind: "duration", default: 10_000 },
  /** A restart's new process waits this long for the port while the previous one drains its calls (DualProtocolListener.close). */
  portWaitMs: { kind: "duration", default: 30_000 },
});

/** ListenerOptions say where the server listens and bound its connections (LISTENER_OPTIONS). */
export type ListenerOptions = OptionsOf<typeof LISTENER_OPTIONS>;
