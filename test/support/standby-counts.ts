import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { type StandbyCounts, standbyCounts } from "../../bench/harness/standby-counts.js";
import { MetadataService } from "../../gen/hf3fs/metadata/v1/metadata_pb.js";
import type { Server } from "./ha-cluster.js";

/** readCounts reads a member's standby reads by outcome from its /metrics. */
export function readCounts(server: Server): Promise<StandbyCounts> {
  return standbyCounts(server.url);
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
