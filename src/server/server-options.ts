import {
  checkBounds,
  checkShard,
  checkWatermarks,
  defaultsOf,
  definedOf,
  type NameOf,
  type OptionTable,
  STATE_OPTIONS,
  type StateOptions,
} from "../core/options.js";
import { LISTENER_OPTIONS, type ListenerOptions } from "../framing/http/listener-options.js";
import { CLUSTER_OPTIONS, type ClusterOptions, checkCluster, resolveMemberShard } from "../replication/cluster-options.js";
import { ACCESS_OPTIONS, type AccessOptions, checkAccess } from "../service/access-options.js";
import { checkVllm, VLLM_OPTIONS, type VllmOptions } from "../service/json/vllm-options.js";
import { LIMIT_OPTIONS, type LimitOptions, resolveLimits } from "../service/limit-options.js";
import { STORE_OPTIONS, type StoreOptions } from "../store/store-options.js";
import { LOG_OPTIONS, type LogOptions } from "./logger.js";
import { checkTls, TLS_OPTIONS, type TlsOptions } from "./tls-options.js";

/** ServerOptions are every option of a server, each concern's beside what consumes it. */
export type ServerOptions = ListenerOptions &
  StoreOptions &
  StateOptions &
  VllmOptions &
  LimitOptions &
  AccessOptions &
  TlsOptions &
  LogOptions &
  ClusterOptions;

/**
 * OptionGroup is one concern's table, and its rules beyond each option's
 * bounds (checkBounds), which may read the options of the concerns before
 * it; `given` are the fields set explicitly (the rest hold defaults).
 */
interface OptionGroup {
  readonly table: OptionTable;
  readonly check?: (options: ServerOptions, name: NameOf, given: ReadonlySet<string>) => void;
}

/** OPTION_GROUPS are the server's concerns, in the order `serve --help` lists them and their rules run. */
export const OPTION_GROUPS: readonly OptionGroup[] = [
  { table: LISTENER_OPTIONS },
  { table: STORE_OPTIONS },
  {
    table: STATE_OPTIONS,
    check: (options, name) => {
      checkWatermarks(options, name);
      checkShard(options, name);
    },
  },
  { table: VLLM_OPTIONS, check: checkVllm },
  { table: LIMIT_OPTIONS, check: (options, name, given) => resolveLimits(options, given, name) },
  { table: ACCESS_OPTIONS, check: checkAccess },
  { table: TLS_OPTIONS, check: checkTls },
  { table: LOG_OPTIONS },
  {
    table: CLUSTER_OPTIONS,
    check: (options, name, given) => {
      resolveMemberShard(options, name, given);
      checkCluster(options, name);
    },
  },
];

/** defaultServerOptions are the documented defaults. */
export const defaultServerOptions: ServerOptions = Object.assign({}, ...OPTION_GROUPS.map(({ table }) => defaultsOf(table)));

/**
 * resolveServerOptions fills the options derived from others that were not
 * given, and throws a RangeError naming (by `name`) the first option that
 * breaks a rule of its concern.
 */
function resolveServerOptions(options: ServerOptions, given: ReadonlySet<string>, name: NameOf): ServerOptions {
  for (const { table, check } of OPTION_GROUPS) {
    checkBounds(table, options, name);
    check?.(options, name, given);
  }
  return options;
}

/**
 * serverOptions is a server's options: the defaults, then `given` (its
 * fields left undefined keep their defaults), then the options derived
 * from others not given, all checked (resolveServerOptions; a RangeError
 * names the option by `name`). The one place a server's options get their
 * defaults, for the command line and for a library's caller alike.
 */
export function serverOptions(given: Partial<ServerOptions> = {}, name: NameOf = (field) => field): ServerOptions {
  const defined = definedOf(given);
  return resolveServerOptions({ ...defaultServerOptions, ...defined }, new Set(Object.keys(defined)), name);
}
