import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { MetadataService } from "../../gen/hf3fs/metadata/v1/metadata_pb.js";
import type { Server } from "./ha-cluster.js";

/** Counts are a member's standby reads by outcome (StandbyReads). */
export interface Counts {
  local: number;
  lagging: number;
  behind: number;
}

/** readCounts reads a member's standby reads by outcome from its /metrics. */
export async function readCounts(server: Server): Promise<Counts> {
  const text = await (await fetch(`${server.url}/metrics`)).text();
  const counts: Counts = { local: 0, lagging: 0, behind: 0 };
  for (const [, outcome, value] of text.matchAll(/^hf3fs_metadata_standby_reads_total\{outcome="(\w+)"\} (\d+)$/gm))
    counts[outcome as keyof Counts] = Number(value);
  return counts;
}

/** untilLocal asks a standby BatchExists until it answers one itself (it learns it holds the log's end within --standby-read-lag); headers go with each. */
export async function untilLocal(standby: Server, namespace: string, headers: Record<string, string> = {}): Promise<void> {
  const client = createClient(MetadataService, createGrpcTransport({ baseUrl: standby.url }));
  const deadline = Date.now() + 10_000;
  const from = (await readCounts(standby)).local;
  while ((await readCounts(standby)).local === from) {
    if (Date.now() > deadline) throw new Error("the standby never answered a read itself");
    // Refused (--standby-calls refuse) or passed to the leader while it learns where it stands.
    await client.batchExists({ namespace, keys: ["probe"] }, { headers }).catch(() => undefined);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
