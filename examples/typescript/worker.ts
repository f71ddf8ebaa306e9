// A worker's cycle with the TypeScript client, as an engine's worker runs it: initialize its rank,
// allocate pages for keys, write them (here: nothing), confirm, then look keys up. It branches on the
// server's reasons and statuses (MetadataError, Reason, AllocationStatus), not on messages.
// Run: npm i hf3fs-metadata, then node worker.js http://127.0.0.1:18000 (after tsc).
import { AllocationStatus, createMetadataClient, MetadataError, Reason } from "hf3fs-metadata/client";

const server = process.argv[2] ?? "http://127.0.0.1:18000";
const client = createMetadataClient({ baseUrl: server }); // gRPC; or protocol: "connect" | "grpc-web"
const namespace = "example";
const rank = 0;

await client.initializeRank({ namespace, rank, numPages: 1_024, worldSize: 1 });
const keys = ["prefix-0", "prefix-0/1", "prefix-0/1/2"];
// Each key's prefix is the key before it: prefix-aware eviction keeps what a prefix match reaches.
const { pages, statuses } = await client.batchAllocate({ namespace, rank, keys, prefixKeys: ["", keys[0]!, keys[1]!] });
const written: string[] = [];
const writtenPages: number[] = [];
keys.forEach((key, i) => {
  switch (statuses[i]) {
    case AllocationStatus.NEW:
    case AllocationStatus.RESERVED:
      written.push(key); // write the KV-cache page to the rank's file at page pages[i] here
      writtenPages.push(pages[i]!);
      break;
    case AllocationStatus.EXISTING:
      break; // complete already: nothing to write
    case AllocationStatus.NO_SPACE:
      console.warn(`no free page for ${key}: every page is reserved`);
      break;
  }
});
await client.confirmWrite({ namespace, rank, keys: written, pages: writtenPages });
const { exists } = await client.batchExists({ namespace, keys });
console.log(JSON.stringify({ written: written.length, exists }));

// A confirmation of a page that was never reserved for the key: the server says why, and where.
try {
  await client.confirmWrite({ namespace, rank, keys: ["never-allocated"], pages: [1_000] });
} catch (error) {
  if (!(error instanceof MetadataError)) throw error;
  if (error.reason !== Reason.RESERVATION_NOT_FOUND) throw error;
  console.log(JSON.stringify({ refused: Reason[error.reason], key: error.key, page: error.page }));
}
