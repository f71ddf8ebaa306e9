import { checkBounds, defaultStateOptions, defaultsOf, type NameOf, type OptionsOf, type OptionTable, optionTable, STATE_OPTIONS } from "../core/index.js";
import { LISTENER_OPTIONS, type ListenerOptions } from "../framing/http/listener-options.js";
import { LOG_OPTIONS, type LogOptions } from "../server/logger.js";
import { checkTls, TLS_OPTIONS, type TlsOptions } from "../server/tls-options.js";
import { ACCESS_OPTIONS, type AccessOptions, checkAccess } from "../service/access-options.js";
import { checkVllm, VLLM_OPTIONS, type VllmOptions } from "../service/json/vllm-options.js";
import { defaultLimitOptions, LIMIT_OPTIONS, resolveBuffers } from "../service/limit-options.js";
import { srvUpstream } from "./upstream-discovery.js";

/** UPSTREAM_OPTIONS say where a relay sends its calls, how long it holds them, and how it proves itself there. */
export const UPSTREAM_OPTIONS = optionTable({
  upstream: {
    flag: "upstream",
    kind: "string",
    default: "",
    defaultHelp: "none: required",
    help: "the server, or a cluster's members by their advertise URLs, comma-separated (http://10.0.0.1:18000,http://10.0.0.2:18000,...), or by a DNS SRV name that lists them, read again every 30 s (srv+https://_grpc._tcp.hf3fs-metadata-members.NS.svc.cluster.local: each record is a member at https://TARGET:PORT, as it advertises itself)",
  },
  holdMs: {
    flag: "hold",
    kind: "duration",
    default: defaultLimitOptions.startupHoldMs,
    help: "how long a call waits for the upstream to answer (failovers, restarts, elections) before UNAVAILABLE (503)",
  },
  upstreamTokenFile: {
    flag: "upstream-token-file",
    kind: "string",
    default: "",
    help: "file whose first line is the token the relay sends upstream as `authorization: Bearer` on every call",
  },
  upstreamCa: { flag: "upstream-ca", kind: "string", default: "", defaultHelp: "the system's CAs", help: "PEM CA the relay trusts for https upstreams" },
  upstreamCert: { flag: "upstream-cert", kind: "string", default: "", help: "PEM client certificate the relay presents upstream (mTLS)" },
  upstreamKey: { flag: "upstream-key", kind: "string", default: "", help: "PEM private key of --upstream-cert" },
});

/** UpstreamOptions say where a relay sends its calls (UPSTREAM_OPTIONS). */
export type UpstreamOptions = OptionsOf<typeof UPSTREAM_OPTIONS>;

/** RELAY_LIMIT_OPTIONS are the limits of the server that bound a relay's callers too: keys per call, bodies, the bytes held, the time to receive. */
export const RELAY_LIMIT_OPTIONS = optionTable({
  maxKeysPerCall: STATE_OPTIONS.maxKeysPerCall,
  maxBodyBytes: LIMIT_OPTIONS.maxBodyBytes,
  maxBufferedBytes: LIMIT_OPTIONS.maxBufferedBytes,
  maxBufferedBytesPerConnection: LIMIT_OPTIONS.maxBufferedBytesPerConnection,
  requestTimeoutMs: LIMIT_OPTIONS.requestTimeoutMs,
});

/** RelayLimitOptions bound a relay's callers (RELAY_LIMIT_OPTIONS). */
export type RelayLimitOptions = OptionsOf<typeof RELAY_LIMIT_OPTIONS>;

/** RelayOptions are every option of `relay`. */
export type RelayOptions = ListenerOptions & UpstreamOptions & VllmOptions & RelayLimitOptions & AccessOptions & TlsOptions & LogOptions;

/** RELAY_TABLES are the relay's concerns, in the order `relay --help` lists them. */
export const RELAY_TABLES: readonly OptionTable[] = [
  LISTENER_OPTIONS,
  UPSTREAM_OPTIONS,
  VLLM_OPTIONS,
  RELAY_LIMIT_OPTIONS,
  ACCESS_OPTIONS,
  TLS_OPTIONS,
  LOG_OPTIONS,
];

/** defaultRelayOptions are the documented defaults (no upstream: one must be given). */
export const defaultRelayOptions: RelayOptions = Object.assign({}, ...RELAY_TABLES.map(defaultsOf));

/**
 * resolveRelayOptions checks every option's bounds, the rules of each
 * concern, and fills the buffers not given from the body limit; it throws
 * a RangeError naming (by `name`) the first option that breaks a rule.
 */
export function resolveRelayOptions(options: RelayOptions, given: ReadonlySet<string>, name: NameOf): RelayOptions {
  for (const table of RELAY_TABLES) checkBounds(table, options, name);
  checkUpstream(options, name);
  // The server's own bounds apply upstream; these are the defaults, so that a relay refuses at start what no default server takes.
  checkVllm({ ...defaultStateOptions, ...options }, name);
  checkAccess(options, name);
  checkTls(options, name);
  resolveBuffers(options, given, name);
  return options;
}

/** checkUpstream throws unless the upstream is a list of http(s) URLs or one SRV name (srvUpstream), and a client certificate comes with its key. */
export function checkUpstream(options: UpstreamOptions, name: NameOf): void {
  if (srvUpstream(options.upstream) === undefined) {
    const urls = upstreamUrls(options.upstream);
    if (urls.length === 0) throw new RangeError(`${name("upstream")} is required: the server, or a cluster's members, comma-separated`);
    for (const url of urls) {
      if (!/^https?:\/\/[^/\s]+\/?$/.test(url)) {
        throw new RangeError(`${name("upstream")} takes http:// or https:// URLs of servers, or one srv+https:// (srv+http://) SRV name, got "${url}"`);
      }
    }
  }
  if ((options.upstreamCert === "") !== (options.upstreamKey === "")) {
    throw new RangeError(`${name("upstreamCert")} and ${name("upstreamKey")} go together`);
  }
}

/** upstreamUrls are the URLs of an --upstream list, without spaces or empty entries. */
export function upstreamUrls(upstream: string): string[] {
  return upstream
    .split(",")
    .map((url) => url.trim())
    .filter((url) => url !== "");
}
