import {
  checkBounds,
  defaultStateOptions,
  defaultsOf,
  definedOf,
  type NameOf,
  type OptionsOf,
  type OptionTable,
  optionTable,
  STATE_OPTIONS,
} from "../core/options.js";
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
    kind: "string",
    default: "",
  },
  holdMs: {
    kind: "duration",
    default: defaultLimitOptions.startupHoldMs,
  },
  readHoldMs: {
    kind: "duration",
    default: 1_000,
  },
  upstreamTokenFile: {
    kind: "string",
    default: "",
  },
  upstreamCa: { kind: "string", default: "" },
  upstreamCert: { kind: "string", default: "" },
  upstreamKey: { kind: "string", default: "" },
  reads: { kind: "string", choices: ["members", "leader"], default: "members" },
});

/** UpstreamOptions say where a relay sends its calls (UPSTREAM_OPTIONS). */
export type UpstreamOptions = OptionsOf<typeof UPSTREAM_OPTIONS>;

/** RELAY_LIMIT_OPTIONS are the limits of the server that bound a relay's callers too: keys per call, bodies, the bytes held, the time to receive. */
export const RELAY_LIMIT_OPTIONS = optionTable({
  maxKeysPerCall: STATE_OPTIONS.maxKeysPerCall,
  maxBodyBytes: LIMIT_OPTIONS.maxBodyBytes,
  maxBufferedBytes: LIMIT_OPTIONS.maxBufferedBytes,
  maxBufferedBytesPerConnection: LIMIT_OPTIONS.maxBufferedBytesPerConnection,
  maxUnsentBytes: LIMIT_OPTIONS.maxUnsentBytes,
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
function resolveRelayOptions(options: RelayOptions, given: ReadonlySet<string>, name: NameOf): RelayOptions {
  for (const table of RELAY_TABLES) checkBounds(table, options, name);
  checkUpstream(options, name);
  // The server's own bounds apply upstream; these are the defaults, so that a relay refuses at start what no default server takes.
  checkVllm({ ...defaultStateOptions, ...options }, name);
  checkAccess(options, name);
  checkTls(options, name);
  resolveBuffers(options, given, name);
  return options;
}

/**
 * relayOptions is a relay's options: the defaults, then `given` (its
 * fields left undefined keep their defaults), then the buffers derived
 * from the body limit when not given, all checked (a RangeError names the
 * option by `name`). The one place a relay's options get their defaults.
 */
export function relayOptions(given: Partial<RelayOptions>, name: NameOf = (field) => field): RelayOptions {
  const defined = definedOf(given);
  return resolveRelayOptions({ ...defaultRelayOptions, ...defined }, new Set(Object.keys(defined)), name);
}

/**
 * checkUpstream throws unless the upstream is a list of http(s) URLs, the
 * lists of a cluster's shards (shardGroups), or one SRV name (srvUpstream),
 * and unless a client certificate comes with its key.
 */
export function checkUpstream(options: UpstreamOptions, name: NameOf): void {
  if (srvUpstream(options.upstream) === undefined) {
    const groups = shardGroups(options.upstream);
    if (groups.length > 1 && groups.some((group) => group.startsWith("srv+"))) {
      throw new RangeError(`${name("upstream")} takes one SRV name, of a cluster of one shard; name the members of each shard instead`);
    }
    if (groups.every((group) => upstreamUrls(group).length === 0)) {
      throw new RangeError(`${name("upstream")} is required: the server, or a cluster's members, comma-separated`);
    }
    for (const [shard, group] of groups.entries()) {
      const urls = upstreamUrls(group);
      if (urls.length === 0) throw new RangeError(`${name("upstream")} names no server of shard ${shard} (shards are separated by ";")`);
      for (const url of urls) {
        if (!/^https?:\/\/[^/\s]+\/?$/.test(url)) {
          throw new RangeError(`${name("upstream")} takes http:// or https:// URLs of servers, or one srv+https:// (srv+http://) SRV name, got "${url}"`);
        }
      }
    }
  }
  if ((options.upstreamCert === "") !== (options.upstreamKey === "")) {
    throw new RangeError(`${name("upstreamCert")} and ${name("upstreamKey")} go together`);
  }
}

/**
 * shardGroups are the shards an --upstream names, in order: lists of
 * members separated by ";" (shard 0's first); one list is a cluster of one
 * shard, as before shards.
 */
export function shardGroups(upstream: string): string[] {
  return upstream.split(";").map((group) => group.trim());
}

/** upstreamUrls are the URLs of an --upstream list, without spaces or empty entries. */
export function upstreamUrls(upstream: string): string[] {
  return upstream
    .split(",")
    .map((url) => url.trim())
    .filter((url) => url !== "");
}
