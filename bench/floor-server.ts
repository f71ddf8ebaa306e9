// floor-server.ts: MetadataService on the same RPC stack as the real server
// (the gRPC fast path and connect-node on the one-port listener), whose
// methods return canned answers of the right size: the floor that the
// service's own work sits on.
import type { ServiceImpl } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { AllocationStatus, MetadataService } from "../gen/hf3fs/metadata/v1/metadata_pb.js";
import { DualProtocolListener } from "../src/server/dual-protocol-listener.js";
import { GrpcUnaryFastPath } from "../src/server/grpc-unary-fast-path.js";
import { requestHandler } from "../src/server/server.js";
import { Lifecycle } from "../src/service/lifecycle.js";

const canned: ServiceImpl<typeof MetadataService> = {
  initializeRank: async (req) => ({ created: true, numPages: req.numPages, freePages: req.numPages, serverId: "floor" }),
  batchAllocate: async (req) => ({ pages: req.keys.map((_, i) => i), statuses: req.keys.map(() => AllocationStatus.NEW) }),
  confirmWrite: async (req) => ({ confirmed: req.keys.length, completed: req.keys.map((_, i) => i) }),
  batchExists: async (req) => ({ exists: req.keys.map(() => true) }),
  getLocations: async (req) => ({ pages: req.keys.map((_, i) => i) }),
  deleteKeys: async (req) => ({ deleted: req.keys.length }),
  clear: async () => ({}),
  getStats: async () => ({}),
};
const fastPath = new GrpcUnaryFastPath(canned, { lifecycle: new Lifecycle(), serverId: "floor", observe: () => undefined }, 64 << 20);
const adapter = connectNodeAdapter({ routes: (router) => router.service(MetadataService, canned) });
const listener = new DualProtocolListener(requestHandler("floor", fastPath, adapter));
const port = await listener.listen("127.0.0.1", 0);
console.log(JSON.stringify({ msg: "listening", url: `http://127.0.0.1:${port}` }));
process.once("SIGTERM", () => void listener.close(1_000).then(() => process.exit(0)));
