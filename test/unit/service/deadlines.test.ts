import * as http2 from "node:http2";
import { create, toBinary } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { BatchAllocateRequestSchema } from "../../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { startTestServer } from "../../support/test-server.js";

function allocateFrame(): Buffer {
  const message = toBinary(BatchAllocateRequestSchema, create(BatchAllocateRequestSchema, { rank: 0, keys: ["late"] }));
  const frame = Buffer.alloc(5 + message.length);
  frame.writeUInt32BE(message.length, 1);
  frame.set(message, 5);
  return frame;
}

/** call sends a BatchAllocate with grpc-timeout, its body cut in two: the second half only once `sendRest` is called. */
function call(session: http2.ClientHttp2Session, timeout: string) {
  const stream = session.request({
    ":method": "POST",
    ":path": "/hf3fs.metadata.v1.MetadataService/BatchAllocate",
    "content-type": "application/grpc",
    "grpc-timeout": timeout,
  });
  const frame = allocateFrame();
  stream.write(frame.subarray(0, 4));
  stream.resume();
  stream.on("error", () => undefined);
  const status = new Promise<string>((resolve) => stream.once("trailers", (t) => resolve(String(t["grpc-status"]))));
  return { status, sendRest: () => stream.end(frame.subarray(4)) };
}

describe("a call's deadline (grpc-timeout)", () => {
  it("ends a call whose body is late with DEADLINE_EXCEEDED, and the call changes nothing", async () => {
    const server = await startTestServer();
    server.state.initializeRank("", 0, 4, 1);
    const session = http2.connect(server.url);
    try {
      const late = call(session, "50m");
      expect(await late.status).toBe("4"); // DEADLINE_EXCEEDED, answered at the deadline while the body is still missing
      late.sendRest();
      const onTime = call(session, "10S");
      onTime.sendRest();
      expect(await onTime.status).toBe("0");
      expect(server.state.stats("")[0]!.ranks[0]).toMatchObject({ reservedPages: 1 });
    } finally {
      session.destroy();
    }
  });

  it("refuses a malformed grpc-timeout", async () => {
    const server = await startTestServer();
    const session = http2.connect(server.url);
    try {
      const bad = call(session, "soon");
      bad.sendRest();
      expect(await bad.status).toBe("3");
    } finally {
      session.destroy();
    }
  });
});
