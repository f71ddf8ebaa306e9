import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { Code, ConnectError } from "@connectrpc/connect";
import { HealthCheckResponse_ServingStatus as ServingStatus } from "../../gen/grpc/health/v1/health_pb.js";
import { createHealthClient, createMetadataClient } from "../client/index.js";
import { NAMESPACE_COUNTERS, type NamespaceCounts } from "../core/index.js";
import { readTokens } from "../service/token-file.js";
import { parseDuration } from "./duration.js";
import { renderStats } from "./render-stats.js";
import { defaultServerOptions } from "./serve-options.js";

/** DEFAULT_SERVER is where `serve` listens by default. */
export const DEFAULT_SERVER = `http://${defaultServerOptions.host}:${defaultServerOptions.port}`;

/**
 * parse reads --server (or HF3FS_METADATA_SERVER), the token (--token-file,
 * or HF3FS_METADATA_TOKEN) and the other flags of an operator command;
 * undefined after --help.
 */
export function parseOperatorArgs(args: string[], usage: string, extra: Record<string, { type: "string" | "boolean" }> = {}) {
  const { values } = parseArgs({
    args,
    options: {
      server: { type: "string" },
      "token-file": { type: "string" },
      "ca-file": { type: "string" },
      "cert-file": { type: "string" },
      "key-file": { type: "string" },
      help: { type: "boolean", short: "h" },
      ...extra,
    },
  });
  if (values.help) {
    console.log(usage);
    return undefined;
  }
  const tokenFile = values["token-file"] as string | undefined;
  const token = tokenFile === undefined ? process.env.HF3FS_METADATA_TOKEN : readTokens(tokenFile)[0];
  const file = (flag: "ca-file" | "cert-file" | "key-file") => (values[flag] === undefined ? undefined : readFileSync(values[flag] as string));
  const tls = { ca: file("ca-file"), cert: file("cert-file"), key: file("key-file") };
  return { server: (values.server as string | undefined) ?? process.env.HF3FS_METADATA_SERVER ?? DEFAULT_SERVER, token, tls, values };
}

/** CONNECTION_HELP describes the token and TLS flags every operator command takes. */
export const CONNECTION_HELP = `--token-file FILE sends the first token of FILE (or env HF3FS_METADATA_TOKEN, the token itself).
--ca-file, --cert-file, --key-file: for an https:// server, the CA to trust and a client certificate and key (mTLS), PEM.`;

const STATS_USAGE = `usage: hf3fs-metadata stats [--server URL] [--token-file FILE] [--ca-file FILE [--cert-file FILE --key-file FILE]] [--namespace NS]

Prints, per namespace and rank, the page usage (bar: # used, + reserved, . free), keys and evictions.
--server defaults to ${DEFAULT_SERVER} (env HF3FS_METADATA_SERVER); without --namespace, every namespace.
${CONNECTION_HELP}`;

/** statsCommand prints the stats of a running server. */
export async function statsCommand(args: string[]): Promise<number> {
  const parsed = tryParse(() => parseOperatorArgs(args, STATS_USAGE, { namespace: { type: "string" } }), STATS_USAGE);
  if (typeof parsed === "number") return parsed;
  const namespace = (parsed.values as { namespace?: string }).namespace;
  try {
    const client = createMetadataClient({ baseUrl: parsed.server, token: parsed.token, tls: parsed.tls, retry: { deadlineMs: 3_000 } });
    const namespaces = [];
    for (let pageToken = "", first = true; first || pageToken !== ""; first = false) {
      const page = await client.getStats({ namespace: namespace ?? "", allNamespaces: namespace === undefined, pageToken });
      namespaces.push(...page.namespaces);
      pageToken = page.nextPageToken;
    }
    if (namespace !== undefined && namespaces.length === 0) {
      console.error(`hf3fs-metadata stats: ${parsed.server} has no namespace "${namespace}"`);
      return 1;
    }
    const views = namespaces.map((ns) => ({
      ...ns,
      ...(Object.fromEntries(NAMESPACE_COUNTERS.map(({ field }) => [field, Number(ns[field])])) as NamespaceCounts),
    }));
    process.stdout.write(renderStats(views));
    return 0;
  } catch (error) {
    console.error(`hf3fs-metadata stats: ${ConnectError.from(error).rawMessage}`);
    return 1;
  }
}

const HEALTH_USAGE = `usage: hf3fs-metadata health [--server URL] [--token-file FILE] [--ca-file FILE [--cert-file FILE --key-file FILE]]

Asks grpc.health.v1.Health; prints the status; exits 0 only when SERVING.
--server defaults to ${DEFAULT_SERVER} (env HF3FS_METADATA_SERVER).
${CONNECTION_HELP}`;

/** healthCommand exits 0 only when the server answers SERVING. */
export async function healthCommand(args: string[]): Promise<number> {
  const parsed = tryParse(() => parseOperatorArgs(args, HEALTH_USAGE), HEALTH_USAGE);
  if (typeof parsed === "number") return parsed;
  try {
    const { status } = await createHealthClient({ baseUrl: parsed.server, token: parsed.token, tls: parsed.tls }).check({}, { timeoutMs: 3_000 });
    console.log(ServingStatus[status]);
    return status === ServingStatus.SERVING ? 0 : 1;
  } catch (error) {
    const e = ConnectError.from(error);
    console.log(e.code === Code.Unavailable ? "UNREACHABLE" : "ERROR");
    console.error(`hf3fs-metadata health: ${parsed.server}: ${e.rawMessage}`);
    return 1;
  }
}

const RESET_USAGE = `usage: hf3fs-metadata reset (--namespace NS | --all) [--force] [--retry-for DURATION] [--server URL] [--token-file FILE] [--ca-file FILE [--cert-file FILE --key-file FILE]]

Forgets a namespace (or every namespace) whole, ranks, keys and reservations, so that the next
InitializeRank defines it anew (a new model, page size or tensor-parallel size). Needs an admin token
when the server has --admin-token-file. Refused while its engines run (a worker's or a scheduler's
call in the last minute: after a reset their next calls fail, and vLLM's never initializes again;
\`clear\` drops the keys and keeps the ranks), while readers hold read leases there, or writers hold
reserved pages; --force forgets it anyway, and a reader still reading may then read pages handed to
other keys, and a writer still writing may write a page handed to another key. On a cluster of
shards a reset without --force is checked on every shard first, so that one a shard refuses changes
no shard.
It retries through restarts and failovers for --retry-for (default 20s). A reset that fails without an
answer (the server or its cluster's leader became unreachable) may have taken effect: it says so; a
repeat is safe, and changes nothing once done.
--server defaults to ${DEFAULT_SERVER} (env HF3FS_METADATA_SERVER).
${CONNECTION_HELP}`;

const CLEAR_USAGE = `usage: hf3fs-metadata clear (--namespace NS | --all) [--retry-for DURATION] [--server URL] [--token-file FILE] [--ca-file FILE [--cert-file FILE --key-file FILE]]

Drops every key and reservation of a namespace (or of every namespace) and keeps its ranks: running
engines go on (their next lookups miss, their writes find free pages), which a reset does not allow.
Pages under a read lease stay held until it ends. Needs a clear or an admin token when the server has
--admin-token-file. It retries through restarts and failovers for --retry-for (default 20s); a clear
that fails without an answer may have taken effect: it says so, and a repeat is safe.
--server defaults to ${DEFAULT_SERVER} (env HF3FS_METADATA_SERVER).
${CONNECTION_HELP}`;

/** ADMIN_RETRY_MS is how long reset and clear retry through a failover or a restart: a repeat of either changes nothing more, so retrying is safe. */
const ADMIN_RETRY_MS = 20_000;

/** resetCommand forgets a namespace (or all) on a running server, and prints what it forgot. */
export function resetCommand(args: string[]): Promise<number> {
  return adminCommand("reset", args, RESET_USAGE, { force: { type: "boolean" } }, async (client, target, values) => {
    const done = await client.resetNamespace({ ...target, force: values.force === true });
    return `${done.namespaces} namespace(s), ${done.ranks} rank(s) and ${done.forgottenKeys} key(s) forgotten`;
  });
}

/** clearCommand drops the keys and reservations of a namespace (or all) on a running server, keeping its ranks. */
export function clearCommand(args: string[]): Promise<number> {
  return adminCommand("clear", args, CLEAR_USAGE, {}, async (client, target) => {
    await client.clear(target);
    return "every key and reservation dropped, the ranks kept";
  });
}

/**
 * adminCommand runs an admin call on a namespace (--namespace NS) or on
 * all (--all): it parses the flags common to reset and clear, retries for
 * --retry-for, prints `NAME WHAT: <what call says>`, and on a call whose
 * outcome is unknown says it may have taken effect and how to check.
 */
async function adminCommand(
  name: string,
  args: string[],
  usage: string,
  extra: Record<string, { type: "string" | "boolean" }>,
  call: (
    client: ReturnType<typeof createMetadataClient>,
    target: { namespace: string; allNamespaces: boolean },
    values: Record<string, string | boolean | undefined>,
  ) => Promise<string>,
): Promise<number> {
  const parsed = tryParse(
    () => parseOperatorArgs(args, usage, { namespace: { type: "string" }, all: { type: "boolean" }, "retry-for": { type: "string" }, ...extra }),
    usage,
  );
  if (typeof parsed === "number") return parsed;
  const values = parsed.values as Record<string, string | boolean | undefined>;
  const namespace = values.namespace as string | undefined;
  const all = values.all === true;
  let retryMs = ADMIN_RETRY_MS;
  try {
    if (values["retry-for"] !== undefined) retryMs = parseDuration(values["retry-for"] as string);
  } catch (error) {
    console.error(`hf3fs-metadata ${name}: --retry-for: ${(error as Error).message}`);
    return 2;
  }
  if ((namespace === undefined) === !all) {
    console.error(`hf3fs-metadata ${name}: give --namespace NS or --all (${name} --help)`);
    return 2;
  }
  const what = all ? "every namespace" : `namespace "${namespace}"`;
  try {
    const client = createMetadataClient({ baseUrl: parsed.server, token: parsed.token, tls: parsed.tls, retry: { deadlineMs: retryMs } });
    console.log(`${name} ${what}: ${await call(client, { namespace: namespace ?? "", allNamespaces: all }, values)}`);
    return 0;
  } catch (e) {
    const error = ConnectError.from(e);
    console.error(`hf3fs-metadata ${name}: ${error.rawMessage}`);
    if (UNANSWERED.has(error.code)) {
      const check = all ? "hf3fs-metadata stats" : `hf3fs-metadata stats --namespace ${JSON.stringify(namespace)}`;
      console.error(
        `hf3fs-metadata ${name}: the ${name} of ${what} may have taken effect nonetheless; \`${check}\` shows what is there, and running ${name} again is safe`,
      );
    }
    return 1;
  }
}

/** UNANSWERED are the codes of a call whose outcome is unknown: it may have been applied before its answer was lost. */
const UNANSWERED: ReadonlySet<Code> = new Set([Code.Unavailable, Code.DeadlineExceeded, Code.Canceled, Code.Aborted, Code.Unknown, Code.Internal]);

/** tryParse runs an operator command's parse: 0 after --help, 2 (with the usage) on a bad flag. */
export function tryParse<T>(parse: () => T | undefined, usage: string): T | number {
  try {
    return parse() ?? 0;
  } catch (e) {
    console.error(`${(e as Error).message}\n\n${usage}`);
    return 2;
  }
}
