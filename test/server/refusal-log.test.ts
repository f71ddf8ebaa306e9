import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { MetadataService } from "../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { invalidArgument, MetadataError, Reason } from "../../src/core/errors.js";
import { RefusalLog } from "../../src/server/refusal-log.js";
import { startTestServer } from "../support/test-server.js";

/** capture is a logger whose lines land in `lines`, parsed. */
function capture() {
  const lines: Record<string, unknown>[] = [];
  const logger = pino({ level: "info" }, { write: (line: string) => lines.push(JSON.parse(line) as Record<string, unknown>) });
  return { logger, lines };
}

describe("the log of refusals engines cannot show", () => {
  it("warns of a refused initialize and of a rank not initialized, once per namespace and rank per minute", () => {
    const { logger, lines } = capture();
    let now = 0;
    const log = new RefusalLog(logger, () => now);
    const mismatch = new MetadataError(Reason.RANK_CONFIG_MISMATCH, 'namespace "kv" has world_size 2, not 4', { namespace: "kv", rank: 1 });
    log.note("vllm.initialize", mismatch);
    log.note("vllm.initialize", mismatch); // the same namespace and rank within the minute
    log.note("BatchAllocate", new MetadataError(Reason.RANK_NOT_INITIALIZED, "rank 3 ...", { namespace: "kv", rank: 3 }));
    log.note("vllm.batch_allocate", invalidArgument("keys", "bad keys", { namespace: "kv", rank: 0 })); // the client sees it: no warning
    log.note("sglang.initialize", invalidArgument("num_pages", "num_pages must be from 1", { namespace: "sg", rank: 0 }));
    log.note("InitializeRank", new Error("not a refusal of the core"));
    now += 59_999;
    log.note("vllm.initialize", mismatch);
    now += 1;
    log.note("vllm.initialize", mismatch);
    expect(lines.map((l) => [l.level, l.msg, l.method, l.namespace, l.rank, l.reason])).toEqual([
      [40, "refused an engine's call", "vllm.initialize", "kv", 1, "REASON_RANK_CONFIG_MISMATCH"],
      [40, "refused an engine's call", "BatchAllocate", "kv", 3, "REASON_RANK_NOT_INITIALIZED"],
      [40, "refused an engine's call", "sglang.initialize", "sg", 0, "REASON_INVALID_ARGUMENT"],
      [40, "refused an engine's call", "vllm.initialize", "kv", 1, "REASON_RANK_CONFIG_MISMATCH"],
    ]);
    expect(lines[0]!.detail).toBe('namespace "kv" has world_size 2, not 4');
  });

  it("remembers a bounded number of namespaces and ranks, however many callers name", () => {
    const { logger, lines } = capture();
    const log = new RefusalLog(logger, () => 0);
    for (let rank = 0; rank < 25_000; rank++) log.note("x", new MetadataError(Reason.RANK_NOT_INITIALIZED, "", { namespace: "kv", rank }));
    expect(lines.length).toBe(25_000);
    expect((log as unknown as { last: Map<string, number> }).last.size).toBeLessThanOrEqual(10_000);
  });

  it("is what a server logs when vLLM's worker is refused, with the detail vLLM's client drops", async () => {
    const { logger, lines } = capture();
    const server = await startTestServer({}, undefined, 0, {}, logger);
    await fetch(`${server.url}/rank/0/initialize`, { method: "POST", body: JSON.stringify({ num_pages: 8, world_size: 2 }) });
    const refused = await fetch(`${server.url}/rank/0/initialize`, { method: "POST", body: JSON.stringify({ num_pages: 8, world_size: 4 }) });
    expect(refused.status).toBe(409);
    expect(lines.filter((l) => l.msg === "refused an engine's call")).toEqual([
      expect.objectContaining({ method: "vllm.initialize", namespace: "kv", rank: 0, detail: expect.stringContaining("has world_size 2, not 4") }),
    ]);
  });

  it("logs the refused calls of a Batch (a relay's gathered calls) as calls alone", async () => {
    const { logger, lines } = capture();
    const server = await startTestServer({}, undefined, 0, {}, logger);
    const client = createClient(MetadataService, createGrpcTransport({ baseUrl: server.url }));
    const { results } = await client.batch({ calls: [{ call: { case: "batchAllocate", value: { namespace: "m", rank: 3, keys: ["k"] } } }] });
    expect(results[0]!.result.case).toBe("error");
    expect(lines.filter((l) => l.msg === "refused an engine's call")).toEqual([
      expect.objectContaining({ method: "BatchAllocate", namespace: "m", rank: 3, reason: "REASON_RANK_NOT_INITIALIZED" }),
    ]);
  });
});
