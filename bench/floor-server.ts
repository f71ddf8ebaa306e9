// floor-server.ts: MetadataService on the same RPC stack as the real server
// (the edge, the gRPC fast path and the connect framing on the one-port
// listener), whose methods return canned answers of the right size: the
// floor that the service's own work sits on.
import type { ServiceImpl } from "@connectrpc/connect";
import { AllocationStatus, type MetadataService } from "../gen/hf3fs/metadata/v1/metadata_pb.js";
import { MetadataState } from "../src/core/state.js";
import { defaultServerOptions } from "../src/server/server-options.js";
import { connectFraming } from "../src/server/transport/connect-framing.js";
import { DualProtocolListener } from "../src/server/transport/dual-protocol-listener.js";
import { GrpcUnaryFastPath } from "../src/server/transport/grpc-unary-fast-path.js";
import { requestHandler } from "../src/server/transport/request-handler.js";
import { Edge } from "../src/service/edge.js";
import { Lifecycle } from "../src/service/lifecycle.js";
import { MemoryStore } from "../src/store/memory-store.js";

const canned: ServiceImpl<typeof MetadataService> = {
  initializeRank: async (req) => ({ created: true, numPages: req.numPages, freePages: req.numPages, serverId: "floor" }),
  batchAllocate: async (req) => ({ pages: req.keys.map((_, i) => i), statuses: req.keys.map(() => AllocationStatus.NEW) }),
  confirmWrite: async (req) => ({ confirmed: req.keys.length, completed: req.keys.map((_, i) => i) }),
  batchExists: async (req) => ({ exists: req.keys.map(() => true) }),
  getLocations: async (req) => ({ pages: req.keys.map((_, i) => i) }),
  deleteKeys: async (req) => ({ deleted: req.keys.length }),
  clear: async () => ({}),
  getStats: async () => ({}),
  dropRank: async () => ({}),
  resetNamespace: async () => ({}),
};
const ledger = { state: new MetadataState(() => Date.now(), {}, false), store: new MemoryStore() };
// The limits of `serve` by default, as the real server has them.
const limits = defaultServerOptions;
const edge = new Edge({ ledger, lifecycle: new Lifecycle(), serverId: "floor", observe: () => undefined, ...limits });
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
