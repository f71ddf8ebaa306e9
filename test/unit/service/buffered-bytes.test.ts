import * as http from "node:http";
import * as http2 from "node:http2";
import { create, toBinary } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { BatchExistsRequestSchema } from "../../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { startTestServer } from "../../support/test-server.js";

/** A BatchExists call of about 900 bytes, in its gRPC envelope. */
function call900(): Buffer {
  const message = toBinary(BatchExistsRequestSchema, create(BatchExistsRequestSchema, { keys: Array.from({ length: 9 }, (_, i) => `${i}`.padEnd(97, "k")) }));
  const frame = Buffer.alloc(5 + message.length);
  frame.writeUInt32BE(message.length, 1);
  frame.set(message, 5);
  return frame;
}

/** Unfinished is a call whose body was sent but not ended; `answer` is its grpc-status (and message) once answered. */
interface Unfinished {
  stream: http2.ClientHttp2Stream;
  answer: Promise<string>;
}

function unfinished(session: http2.ClientHttp2Session): Unfinished {
  const stream = session.request({ ":method": "POST", ":path": "/hf3fs.metadata.v1.MetadataService/BatchExists", "content-type": "application/grpc" });
  stream.write(call900());
  stream.resume();
  stream.on("error", () => undefined);
  const answer = new Promise<string>((resolve) =>
    stream.once("trailers", (trailers) => resolve(`${trailers["grpc-status"]} ${decodeURIComponent(String(trailers["grpc-message"] ?? ""))}`)),
  );
  return { stream, answer };
}

describe("unfinished request bodies", () => {
  it("are held only within the per-connection and server bounds; past them a call is refused at once", async () => {
    const server = await startTestServer({}, undefined, 0, { maxBodyBytes: 1_000, maxBufferedBytesPerConnection: 2_000, maxBufferedBytes: 3_000 });
    const a = http2.connect(server.url);
    const b = http2.connect(server.url);
    const c = http2.connect(server.url);
    try {
      const held = [unfinished(a), unfinished(a)];
      // A third body on connection a passes its 2,000 bytes: refused before its end, and the stream reset.
      const third = unfinished(a);
      expect(await third.answer).toMatch(/^8 this connection's unfinished requests hold more than 2000 bytes/);
      await new Promise((resolve) => third.stream.once("close", resolve));
      expect(third.stream.rstCode).toBe(http2.constants.NGHTTP2_NO_ERROR);
      // On b, a first body fits in the server's 3,000 bytes (2,700 held); the next one does not (b's frames arrive in order).
      const fits = unfinished(b);
      expect(await unfinished(b).answer).toMatch(/^8 the server holds more than 3000 bytes of unfinished requests/);
      // So does an HTTP/1.1 JSON body: 413 at once, and the connection is closed after the answer.
      const json = http.request(`${server.url}/keys/batch_exists`, { method: "POST", headers: { "content-type": "application/json" } });
      json.write(`{"keys": ["${"k".repeat(900)}`);
      const res = await new Promise<http.IncomingMessage>((resolve) => json.once("response", resolve));
      expect([res.statusCode, res.headers.connection]).toEqual([413, "close"]);
      json.destroy();
      // Ended, the held calls are served, and give their bytes back.
      for (const call of [...held, fits]) call.stream.end();
      for (const call of [...held, fits]) expect(await call.answer).toBe("0 ");
      const again = unfinished(c);
      again.stream.end();
      expect(await again.answer).toBe("0 ");
    } finally {
      for (const session of [a, b, c]) session.destroy();
    }
  });
});
