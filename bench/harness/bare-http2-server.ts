// bare-http2-server.ts: the least a gRPC server on node:http2 can do per call,
// the baseline of `--only=floor`: it collects the request body (and joins its
// chunks, as the real server does) and answers each method with a fixed gRPC
// message of the size the real server's answer to a B-key call has, plus
// trailers. Run: node --import tsx bench/harness/bare-http2-server.ts B
import * as http2 from "node:http2";
import { create, toBinary } from "@bufbuild/protobuf";
import {
  AllocationStatus,
  BatchAllocateResponseSchema,
  BatchExistsResponseSchema,
  ConfirmWriteResponseSchema,
  GetLocationsResponseSchema,
  InitializeRankResponseSchema,
  MetadataService,
} from "../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { grpcFrame } from "./lean-grpc.js";

const b = Number(process.argv[2] ?? 512);
const pages = Array.from({ length: b }, (_, i) => i);
const answers: Record<string, Buffer> = {
  InitializeRank: grpcFrame(toBinary(InitializeRankResponseSchema, create(InitializeRankResponseSchema, { created: true, serverId: "bare" }))),
  BatchAllocate: grpcFrame(
    toBinary(BatchAllocateResponseSchema, create(BatchAllocateResponseSchema, { pages, statuses: pages.map(() => AllocationStatus.NEW) })),
  ),
  ConfirmWrite: grpcFrame(toBinary(ConfirmWriteResponseSchema, create(ConfirmWriteResponseSchema, { confirmed: b, completed: pages }))),
  BatchExists: grpcFrame(toBinary(BatchExistsResponseSchema, create(BatchExistsResponseSchema, { exists: pages.map(() => true) }))),
  GetLocations: grpcFrame(toBinary(GetLocationsResponseSchema, create(GetLocationsResponseSchema, { pages }))),
};
const byPath = new Map(Object.entries(answers).map(([method, frame]) => [`/${MetadataService.typeName}/${method}`, frame]));
const HEADERS = { "content-type": "application/grpc+proto" };
const TRAILERS = { "grpc-status": "0" };

// The socket and flow-control settings the real listener has (dual-protocol-listener.ts): no Nagle, and windows a 33 KB
// request does not wait on.
const server = http2.createServer({ settings: { initialWindowSize: 1 << 20 } });
server.on("connection", (socket: import("node:net").Socket) => socket.setNoDelay(true));
server.on("session", (session) => {
  if (session.connecting) session.once("connect", () => session.setLocalWindowSize(16 << 20));
  else session.setLocalWindowSize(16 << 20);
});
server.on("request", (req: http2.Http2ServerRequest, res: http2.Http2ServerResponse) => {
  const chunks: Buffer[] = [];
  req.on("data", (chunk: Buffer) => chunks.push(chunk));
  req.on("end", () => {
    const body = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
    const answer = byPath.get(req.url);
    res.writeHead(200, HEADERS);
    if (answer === undefined || body.length < 5) {
      res.addTrailers({ "grpc-status": "12" });
      res.end();
    } else {
      res.addTrailers(TRAILERS);
      res.end(answer);
    }
  });
});
server.listen(0, "127.0.0.1", () => {
  const { port } = server.address() as { port: number };
  console.log(JSON.stringify({ msg: "listening", url: `http://127.0.0.1:${port}` }));
});
process.once("SIGTERM", () => server.close(() => process.exit(0)));
