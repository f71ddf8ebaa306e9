// floor-server.ts: MetadataService on the same RPC stack as the real server
// (the edge, the gRPC fast path with its batch codecs and the connect framing
// on the one-port listener), whose methods return canned answers of the right
// size, counting keys on the bytes as the core does (no key becomes a string):
// the floor that the service's own work sits on. It runs the compiled build
// (dist/, which `npm run bench` makes first), as the real server does in the
// bench and in production: tsx's output of the same code costs more per call.
import type { ServiceImpl } from "@connectrpc/connect";
import { AllocationStatus, type MetadataService } from "../../dist/gen/hf3fs/metadata/v1/metadata_pb.js";
import { MetadataState } from "../../dist/src/core/state.js";
import { connectFraming } from "../../dist/src/framing/connect/connect-framing.js";
import { GrpcUnaryFastPath } from "../../dist/src/framing/grpc/grpc-unary-fast-path.js";
import { HttpBodyReader } from "../../dist/src/framing/http/body-reader.js";
import { DualProtocolListener } from "../../dist/src/framing/http/dual-protocol-listener.js";
import { requestHandler } from "../../dist/src/server/request-handler.js";
import { defaultServerOptions } from "../../dist/src/server/server-options.js";
import { runBatch } from "../../dist/src/service/batch-calls.js";
import { Edge } from "../../dist/src/service/edge.js";
import { KeyBytesMessage } from "../../dist/src/service/key-bytes.js";
import { Lifecycle } from "../../dist/src/service/lifecycle.js";
import { MemoryStore } from "../../dist/src/store/memory-store.js";

/** count is a request's number of keys, read from the bytes the fast path left (as the core reads them), not from strings. */
function count(req: { keys: string[] }): number {
  return req instanceof KeyBytesMessage ? (req.keyLists.keys?.length ?? 0) : req.keys.length;
}

/** cannedBy caches one answer per key count, so that the floor allocates nothing per call but what the stack does. */
function cannedBy<T>(make: (n: number) => T): (n: number) => T {
  const made = new Map<number, T>();
  return (n) => {
    let answer = made.get(n);
    if (answer === undefined) {
      answer = make(n);
      made.set(n, answer);
    }
    return answer;
  };
}

const pagesOf = cannedBy((n) => Array.from({ length: n }, (_, i) => i));
const allocated = cannedBy((n) => ({ pages: pagesOf(n), statuses: pagesOf(n).map(() => AllocationStatus.NEW) }));
const confirmed = cannedBy((n) => ({ confirmed: n, completed: pagesOf(n) }));
const present = cannedBy((n) => ({ exists: pagesOf(n).map(() => true) }));
const located = cannedBy((n) => ({ pages: pagesOf(n) }));

const canned: ServiceImpl<typeof MetadataService> = {
  initializeRank: async (req) => ({ created: true, numPages: req.numPages, freePages: req.numPages, serverId: "floor" }),
  batchAllocate: async (req) => allocated(count(req)),
  confirmWrite: async (req) => confirmed(count(req)),
  batchExists: async (req) => present(count(req)),
  getLocations: async (req) => located(count(req)),
  deleteKeys: async (req) => ({ deleted: req.keys.length }),
  clear: async () => ({}),
  getStats: async () => ({}),
  dropRank: async () => ({}),
  resetNamespace: async () => ({}),
  // A Batch is the calls it carries, each answered by its canned handler.
  batch: async (req) => runBatch(req, (method, one) => (canned[method] as unknown as (r: typeof one) => Promise<never>)(one)),
};
const ledger = { state: new MetadataState(() => Date.now(), {}, false), store: new MemoryStore() };
// The limits of `serve` by default, as the real server has them.
const limits = defaultServerOptions;
const edge = new Edge({ ledger, lifecycle: new Lifecycle(), serverId: "floor", observe: () => undefined, reader: new HttpBodyReader(limits), ...limits });
const connect = connectFraming(
  edge,
  canned,
  () => undefined,
  (_req, res) => res.writeHead(404).end(),
);
const listener = new DualProtocolListener(requestHandler("floor", new GrpcUnaryFastPath(canned, edge), connect), limits);
const port = await listener.listen("127.0.0.1", 0);
console.log(JSON.stringify({ msg: "listening", url: `http://127.0.0.1:${port}` }));
process.once("SIGTERM", () => void listener.close(1_000).then(() => process.exit(0)));
