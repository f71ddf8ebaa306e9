import { type ClientHttp2Session, connect, constants } from "node:http2";
import { connect as tcpConnect } from "node:net";

/**
 * LeanGrpc makes unary gRPC calls over one HTTP/2 connection with nothing
 * but node:http2: the benchmark's load generator must cost less CPU than the
 * server it measures, and a full client stack costs several times more per
 * call. Not a client for production: no deadlines, retries or compression.
 */
export class LeanGrpc {
  private readonly session: ClientHttp2Session;

  constructor(url: string) {
    const { hostname, port } = new URL(url);
    // No Nagle: a request of several segments must not wait for a delayed ACK.
    const createConnection = () => tcpConnect({ host: hostname, port: Number(port), noDelay: true });
    this.session = connect(url, { settings: { initialWindowSize: 16 << 20 }, createConnection });
    this.session.once("connect", () => this.session.setLocalWindowSize(64 << 20));
  }

  /** call posts one message to path ("/pkg.Service/Method") and resolves with the response message bytes. */
  call(path: string, message: Uint8Array): Promise<Buffer> {
    return this.callFramed(path, grpcFrame(message));
  }

  /** callFramed posts a request already in its gRPC frame (header included) and resolves with the response message bytes. */
  callFramed(path: string, frame: Buffer): Promise<Buffer> {
    return new Promise((resolve, reject) => {
      const stream = this.session.request({
        [constants.HTTP2_HEADER_METHOD]: "POST",
        [constants.HTTP2_HEADER_PATH]: path,
        "content-type": "application/grpc",
        te: "trailers",
      });
      const chunks: Buffer[] = [];
      let status: string | undefined;
      stream.on("data", (chunk: Buffer) => chunks.push(chunk));
      stream.on("trailers", (trailers) => (status = trailers["grpc-status"] as string));
      stream.on("response", (headers) => {
        if (headers["grpc-status"] !== undefined) status = headers["grpc-status"] as string;
      });
      stream.on("error", reject);
      stream.on("end", () => {
        if (status !== "0") return reject(new Error(`grpc-status ${status} on ${path}`));
        const body = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
        resolve(body.subarray(5, 5 + body.readUInt32BE(1)));
      });
      stream.end(frame);
    });
  }

  close(): void {
    this.session.close();
  }
}

/** grpcFrame puts one uncompressed message in its gRPC frame: a zero flag byte, the length (big-endian uint32), the message. */
export function grpcFrame(message: Uint8Array): Buffer {
  const frame = Buffer.allocUnsafe(5 + message.length);
  frame[0] = 0;
  frame.writeUInt32BE(message.length, 1);
  frame.set(message, 5);
  return frame;
}
