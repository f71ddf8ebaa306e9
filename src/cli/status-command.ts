import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { MemberRole, ReplicationService, type StatusResponse } from "../../gen/hf3fs/metadata/internal/v1/replication_pb.js";
import { transportFor } from "../client/metadata-client.js";
import { CONNECTION_HELP, DEFAULT_SERVER, parseOperatorArgs, tryParse } from "./operator-commands.js";

const STATUS_USAGE = `usage: hf3fs-metadata status [--server URL] [--token-file FILE] [--ca-file FILE [--cert-file FILE --key-file FILE]]

Prints the members of the highly available cluster that the server belongs to: each member's id,
URL, role, the last log entry it applied and how far it is behind the leader (in log entries).
Exits 0 when a member leads, 1 when none does or the server cannot tell.
--server (any member) defaults to ${DEFAULT_SERVER} (env HF3FS_METADATA_SERVER).
${CONNECTION_HELP}`;

/** statusCommand prints the cluster's members as a member reports them. */
export async function statusCommand(args: string[]): Promise<number> {
  const parsed = tryParse(() => parseOperatorArgs(args, STATUS_USAGE), STATUS_USAGE);
  if (typeof parsed === "number") return parsed;
  try {
    const client = createClient(ReplicationService, transportFor({ baseUrl: parsed.server, token: parsed.token, tls: parsed.tls }));
    const status = await client.status({}, { timeoutMs: 5_000 });
    process.stdout.write(renderStatus(status));
    return status.members.some((m) => m.role === MemberRole.LEADER) ? 0 : 1;
  } catch (error) {
    const e = ConnectError.from(error);
    const why = e.code === Code.Unimplemented ? "it runs single-node (no --etcd-endpoints)" : e.rawMessage;
    console.error(`hf3fs-metadata status: ${parsed.server}: ${why}`);
    return 1;
  }
}

/** renderStatus is the status as a table, the leader first. */
export function renderStatus(status: StatusResponse): string {
  const members = [...status.members].sort((a, b) => a.role - b.role || a.url.localeCompare(b.url));
  const leader = members.find((m) => m.role === MemberRole.LEADER);
  const rows = members.map((m) => [
    m.memberId,
    m.url,
    m.role === MemberRole.LEADER ? "leader" : "standby",
    String(m.appliedSeq),
    leader === undefined ? "-" : String(leader.appliedSeq > m.appliedSeq ? leader.appliedSeq - m.appliedSeq : 0n),
  ]);
  const table = [["MEMBER", "URL", "ROLE", "APPLIED", "LAG"], ...rows];
  const widths = table[0]!.map((_, i) => Math.max(...table.map((row) => row[i]!.length)));
  const lines = table.map((row) =>
    row
      .map((cell, i) => cell.padEnd(widths[i]!))
      .join("  ")
      .trimEnd(),
  );
  const head = `cluster ${status.clusterName} (${status.clusterId}): ${leader === undefined ? "no leader" : `leader ${leader.url}`}`;
  return `${[head, ...lines].join("\n")}\n`;
}
