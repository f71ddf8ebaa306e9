import * as http from "node:http";
import * as https from "node:https";
import { Code, ConnectError, createClient, type Transport } from "@connectrpc/connect";
import { MemberRole, ReplicationService, type StatusResponse } from "../../gen/hf3fs/metadata/internal/v1/replication_pb.js";
import { ClusterService } from "../../gen/hf3fs/metadata/v1/cluster_pb.js";
import { transportFor } from "../client/metadata-client.js";
import { SILENT_MEANS } from "../protocol/ping-within.js";
import { type LoadStatus, percentOf } from "../store/load-progress.js";
import { CONNECTION_HELP, DEFAULT_SERVER, parseOperatorArgs, tryParse } from "./operator-commands.js";

/** DEFAULT_MAX_LAG is how many log entries a member may be behind the leader before status calls the cluster unhealthy. */
const DEFAULT_MAX_LAG = 1_000;

const STATUS_USAGE = `usage: hf3fs-metadata status [--server URL] [--json] [--max-lag N] [--forget MEMBER] [--token-file FILE] [--ca-file FILE [--cert-file FILE --key-file FILE]]

Prints every member the highly available cluster has known: its id, URL, role (leader, standby, or down
once its lease lapsed), the last log entry it applied, how far it is behind the leader (in log entries)
and when it last published, and how far a member's long load is (its standby state, a snapshot). Exits 0
when a member leads, none is down or loading and none lags more than --max-lag entries (default
${DEFAULT_MAX_LAG}); 1 otherwise, or when the server cannot tell. A cluster of shards also lists each shard's
leader and members, and exits 1 while a shard has no leader, or any shard's members are down, loading
or lagging as above (it asks a member of each other shard). A single-node server reports itself:
serving, or how far it is in loading its store; a relay, whether it reaches a server that answers
calls. --json prints the same as one JSON object. --forget MEMBER removes a member that is down for
good (an admin call with token files).
--server (any member) defaults to ${DEFAULT_SERVER} (env HF3FS_METADATA_SERVER).
${CONNECTION_HELP}`;

/** MemberView is one member as status shows it. */
interface MemberView {
  memberId: string;
  url: string;
  role: "leader" | "standby" | "down";
  appliedSeq: number;
  /** lag is how many log entries it is behind the leader; null without a leader. */
  lag: number | null;
  /** lastSeenAt is when it last published (ISO 8601, by its own clock). */
  lastSeenAt: string;
  /** loading is how far its long load is, while it runs one. */
  loading: LoadView | null;
}

/** LoadView is a load under way as status shows it: the fields of the server's LoadStatus that both sources carry (total 0 until known, secondsLeft null until it is known and the load has a rate). */
type LoadView = Pick<LoadStatus, "task" | "records" | "total" | "percent" | "secondsLeft">;

/** statusCommand prints the cluster's members as a member reports them, or forgets one that is down. */
export async function statusCommand(args: string[]): Promise<number> {
  const parsed = tryParse(
    () => parseOperatorArgs(args, STATUS_USAGE, { json: { type: "boolean" }, "max-lag": { type: "string" }, forget: { type: "string" } }),
    STATUS_USAGE,
  );
  if (typeof parsed === "number") return parsed;
  const values = parsed.values as { json?: boolean; "max-lag"?: string; forget?: string };
  const maxLag = values["max-lag"] === undefined ? DEFAULT_MAX_LAG : Number(values["max-lag"]);
  if (!Number.isInteger(maxLag) || maxLag < 0) {
    console.error(`hf3fs-metadata status: --max-lag must be a whole number of log entries, got "${values["max-lag"]}" (status --help)`);
    return 2;
  }
  try {
    const transport = transportFor({ baseUrl: parsed.server, token: parsed.token, tls: parsed.tls });
    const client = createClient(ReplicationService, transport);
    if (values.forget !== undefined) {
      await client.forget({ memberId: values.forget }, { timeoutMs: 5_000 });
      console.log(`forgot member ${values.forget}`);
      return 0;
    }
    const status = await client.status({}, { timeoutMs: 5_000 });
    const members = viewsOf(status);
    const leader = members.find((m) => m.role === "leader");
    const shards = await shardsOf(transport);
    const others =
      shards === undefined
        ? []
        : await otherShardProblems(shards, members, maxLag, (url) => transportFor({ baseUrl: url, token: parsed.token, tls: parsed.tls }));
    const problems = [...problemsOf(members, maxLag), ...others];
    if (values.json) {
      const report = {
        clusterName: status.clusterName,
        clusterId: status.clusterId,
        leader: leader?.url ?? null,
        healthy: problems.length === 0,
        problems,
        maxLag,
        members,
        ...(shards && { shards }),
      };
      console.log(JSON.stringify(report));
    } else process.stdout.write(renderStatus(status, members, problems, shards));
    return problems.length === 0 ? 0 : 1;
  } catch (error) {
    const e = ConnectError.from(error);
    if (e.code === Code.Unimplemented) return standaloneStatus(parsed, values.json === true); // no cluster: no ReplicationService
    console.error(`hf3fs-metadata status: ${parsed.server}: ${e.rawMessage}`);
    return 1;
  }
}

/** ShardView is one shard of a cluster split into shards as status shows it: its leader (null when none is known) and its members' URLs. */
interface ShardView {
  shard: number;
  leader: string | null;
  members: string[];
}

/** shardsOf reads the cluster's shards from the member's topology; undefined for a cluster of one shard, or a member too old to tell. */
async function shardsOf(transport: Transport): Promise<ShardView[] | undefined> {
  const topology = await createClient(ClusterService, transport)
    .getTopology({}, { timeoutMs: 5_000 })
    .catch(() => undefined);
  if (topology === undefined || topology.shardCount <= 1) return undefined;
  return topology.shards.map((s) => ({
    shard: s.index,
    leader: s.members.find((m) => m.leader)?.url ?? null,
    members: s.members.map((m) => m.url),
  }));
}

/**
 * otherShardProblems asks each other shard's cluster for its members
 * (Status at its leader, or at its first member while the topology names
 * none) and says, by shard and once each, what makes it unhealthy, as
 * problemsOf does for the asked member's own: each shard has a log, a
 * leader and members of its own.
 */
async function otherShardProblems(shards: ShardView[], own: MemberView[], maxLag: number, connect: (url: string) => Transport): Promise<string[]> {
  const ownUrls = new Set(own.map((m) => m.url));
  const others = shards.filter((s) => !s.members.some((url) => ownUrls.has(url)));
  const asked = await Promise.all(
    others.map(async (s) => {
      const problems = s.leader === null ? ["no leader"] : [];
      const url = s.leader ?? s.members[0];
      if (url === undefined) problems.push("no member known");
      else {
        try {
          problems.push(...problemsOf(viewsOf(await createClient(ReplicationService, connect(url)).status({}, { timeoutMs: 5_000 })), maxLag));
        } catch (error) {
          problems.push(`${url} did not answer (${ConnectError.from(error).rawMessage})`);
        }
      }
      return [...new Set(problems)].map((p) => `shard ${s.shard}: ${p}`);
    }),
  );
  return asked.flat();
}

/** StatusPage is what status reads of a status page's data (GET /status.json): a server's or a relay's. */
type StatusPage =
  | { kind: "server"; serverId: string; url: string; loading?: LoadView }
  | { kind: "relay"; url: string; upstream: string; reachable: boolean; callsGoTo?: string[]; silent?: string[] };

/**
 * standaloneStatus reports what answers without a cluster from its status
 * page's data (GET /status.json, with the token): a single-node server,
 * serving (0) or loading its store, and how far (1); a relay, reaching a
 * server that answers calls (0) or not (1).
 */
async function standaloneStatus(parsed: Exclude<ReturnType<typeof parseOperatorArgs>, undefined>, json: boolean): Promise<number> {
  let page: StatusPage;
  try {
    page = JSON.parse(await getText(`${parsed.server.replace(/\/+$/, "")}/status.json`, parsed.token, parsed.tls));
  } catch (error) {
    console.error(`hf3fs-metadata status: ${parsed.server}: ${(error as Error).message}`);
    return 1;
  }
  if (page.kind === "relay") {
    const problems = page.reachable ? [] : ["no upstream server answers calls"];
    const [callsGoTo, silent] = [page.callsGoTo ?? [], page.silent ?? []];
    if (json) console.log(JSON.stringify({ relay: true, url: page.url, upstream: page.upstream, healthy: page.reachable, problems, callsGoTo, silent }));
    else {
      const reach = page.reachable ? "reaching a server that answers calls" : "reaching no server that answers calls";
      const going = callsGoTo.length === 0 ? "" : `; calls go to ${callsGoTo.join(", ")}`;
      const stalled = silent.length === 0 ? "" : `; silent (${SILENT_MEANS}): ${silent.join(", ")}`;
      console.log(`relay at ${page.url} to ${page.upstream}: ${reach}${going}${stalled}`);
    }
    return page.reachable ? 0 : 1;
  }
  const loading = page.loading === undefined ? null : loadView(page.loading);
  const problems = loading === null ? [] : [`still ${loading.task}`];
  if (json) console.log(JSON.stringify({ singleNode: true, serverId: page.serverId, url: page.url, healthy: problems.length === 0, problems, loading }));
  else console.log(`single-node server ${page.serverId} at ${page.url}: ${loading === null ? "serving" : describeLoad(loading)}`);
  return problems.length === 0 ? 0 : 1;
}

/** getText GETs a URL (http or https, with the operator's token and TLS files) and returns its body; an answer other than 200 throws with its body (and, for a 401, the flag that sends a token). */
function getText(url: string, token: string | undefined, tls: { ca?: Buffer; cert?: Buffer; key?: Buffer }): Promise<string> {
  const headers = token === undefined ? {} : { authorization: `Bearer ${token}` };
  const get = url.startsWith("https:") ? https.get : http.get;
  return new Promise((resolve, reject) => {
    const req = get(url, { headers, ...tls, timeout: 5_000 }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => (body += chunk));
      const hint = res.statusCode === 401 ? " (status --token-file FILE)" : "";
      res.on("end", () => (res.statusCode === 200 ? resolve(body) : reject(new Error(`GET /status.json: ${res.statusCode} ${body.trim()}${hint}`))));
    });
    req.on("timeout", () => req.destroy(new Error("no answer within 5 s")));
    req.on("error", reject);
  });
}

/** loadView is a load as a server reports it (status.json's progress fields, or Status's MemberLoad). */
function loadView(load: { task: string; records: number; total: number; secondsLeft?: number | null }): LoadView {
  const { task, records, total } = load;
  return { task, records, total, percent: percentOf(records, total), secondsLeft: load.secondsLeft ?? null };
}

/** describeLoad is a load in words, e.g. "loading a snapshot: 45% (450000 of 1000000 records, 12 s left)". */
function describeLoad({ task, records, total, percent, secondsLeft }: LoadView): string {
  const of = total > 0 ? `${records} of ${total} records` : `${records} records`;
  return `${task}: ${percent}% (${of}${secondsLeft === null ? "" : `, ${secondsLeft} s left`})`;
}

/** viewsOf is each member as status shows it: the leader first, then by URL. */
function viewsOf(status: StatusResponse): MemberView[] {
  const roles: Record<number, MemberView["role"]> = { [MemberRole.LEADER]: "leader", [MemberRole.STANDBY]: "standby", [MemberRole.DOWN]: "down" };
  const leader = status.members.find((m) => m.role === MemberRole.LEADER);
  return [...status.members]
    .sort((a, b) => a.role - b.role || a.url.localeCompare(b.url))
    .map((m) => ({
      memberId: m.memberId,
      url: m.url,
      role: roles[m.role] ?? "down",
      appliedSeq: Number(m.appliedSeq),
      lag: leader === undefined ? null : Math.max(0, Number(leader.appliedSeq - m.appliedSeq)),
      lastSeenAt: new Date(Number(m.publishedAtMs)).toISOString(),
      loading:
        m.loading === undefined
          ? null
          : loadView({ task: m.loading.task, records: Number(m.loading.records), total: Number(m.loading.total), secondsLeft: m.loading.secondsLeft }),
    }));
}

/** problemsOf says what makes a cluster unhealthy: no leader, members down, members lagging past maxLag; none when healthy. */
function problemsOf(members: MemberView[], maxLag: number): string[] {
  const down = members.filter((m) => m.role === "down").length;
  const lagging = members.filter((m) => m.role !== "down" && (m.lag ?? 0) > maxLag).length;
  const loading = members.filter((m) => m.loading !== null).length;
  return [
    members.some((m) => m.role === "leader") ? "" : "no leader",
    down > 0 ? `${down} member(s) down` : "",
    lagging > 0 ? `${lagging} member(s) more than ${maxLag} log entries behind` : "",
    loading > 0 ? `${loading} member(s) loading` : "",
  ].filter((p) => p !== "");
}

/** renderStatus is the status as a table, the leader first, then a line per member that loads, and a line that says whether the cluster is healthy, and if not why. */
export function renderStatus(status: StatusResponse, members: MemberView[], problems: string[], shards?: ShardView[]): string {
  const rows = members.map((m) => [
    m.memberId,
    m.url,
    m.role,
    String(m.appliedSeq),
    m.lag === null ? "-" : String(m.lag),
    ago(Date.now() - Date.parse(m.lastSeenAt)),
  ]);
  const table = [["MEMBER", "URL", "ROLE", "APPLIED", "LAG", "LAST SEEN"], ...rows];
  const widths = table[0]!.map((_, i) => Math.max(...table.map((row) => row[i]!.length)));
  const lines = table.map((row) =>
    row
      .map((cell, i) => cell.padEnd(widths[i]!))
      .join("  ")
      .trimEnd(),
  );
  const leader = members.find((m) => m.role === "leader");
  const head = `cluster ${status.clusterName} (${status.clusterId}): ${leader === undefined ? "no leader" : `leader ${leader.url}`}`;
  const loads = members.flatMap((m) => (m.loading === null ? [] : [`member ${m.memberId}: ${describeLoad(m.loading)}`]));
  const split = (shards ?? []).map(
    (s) => `shard ${s.shard} of ${shards!.length}: ${s.leader === null ? "no leader" : `leader ${s.leader}`} (${s.members.length} member(s))`,
  );
  const verdict = problems.length === 0 ? "healthy" : `degraded: ${problems.join(", ")}`;
  return `${[head, ...lines, ...loads, ...split, verdict].join("\n")}\n`;
}

/** ago is a time since, as a person reads it. */
function ago(ms: number): string {
  if (ms < 2_000) return "now";
  if (ms < 120_000) return `${Math.round(ms / 1_000)}s ago`;
  return `${Math.round(ms / 60_000)}m ago`;
}
