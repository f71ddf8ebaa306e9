/**
 * soak-worker: one client of bench/probes/soak.ts. Runs the worker cycle
 * (BatchAllocate, ConfirmWrite, BatchExists, GetLocations) with batches of
 * 1 to 256 fresh keys on its rank, and a DeleteKeys now and then, until
 * killed; one call in ten has a deadline of 1 to 5 ms. Prints one JSON line
 * of counts per second.
 */
import { randomBytes } from "node:crypto";
import { ConnectError } from "@connectrpc/connect";
import { createMetadataClient } from "../../src/client/index.js";

const [url, rankArg] = process.argv.slice(2);
const rank = Number(rankArg);
const client = createMetadataClient({ baseUrl: url!, retry: { deadlineMs: 2_000 } });
const counts: Record<string, number> = {};
const note = (what: string) => (counts[what] = (counts[what] ?? 0) + 1);
setInterval(() => console.log(JSON.stringify(counts)), 1_000).unref();

const options = () => (Math.random() < 0.1 ? { timeoutMs: 1 + Math.floor(Math.random() * 5) } : undefined);

async function cycle(): Promise<void> {
  const keys = Array.from({ length: 1 + Math.floor(Math.random() * 256) }, () => randomBytes(16).toString("hex"));
  const { pages } = await client.batchAllocate({ namespace: "soak", rank, keys }, options());
  const confirmable = keys.filter((_, i) => pages[i]! >= 0);
  await client.confirmWrite({ namespace: "soak", rank, keys: confirmable, pages: pages.filter((p) => p >= 0) }, options());
  await client.batchExists({ namespace: "soak", keys }, options());
  await client.getLocations({ namespace: "soak", rank, keys }, options());
  if (Math.random() < 0.05) await client.deleteKeys({ namespace: "soak", keys: keys.slice(0, 16) }, options());
}

await client.initializeRank({ namespace: "soak", rank, numPages: 20_000, worldSize: 0 });
for (;;) {
  try {
    await cycle();
    note("cycles");
  } catch (error) {
    note(ConnectError.from(error).code === undefined ? "error" : `code ${ConnectError.from(error).code}`);
  }
}
