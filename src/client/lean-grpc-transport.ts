import * as http2 from "node:http2";
import { create, type DescMessage, fromBinary, type MessageInitShape } from "@bufbuild/protobuf";
import { Code, ConnectError, type Transport } from "@connectrpc/connect";
import { codeFromHttpStatus, findTrailerError } from "@connectrpc/connect/protocol-grpc";
import { onlyMessage } from "../protocol/envelope.js";
import { encodeFramed } from "./flat-encoder.js";
import { LeanSession } from "./lean-session.js";
import type { ClientTls } from "./metadata-client.js";

/** LeanGrpcOptions configure createLeanGrpcTransport. */
export interface LeanGrpcOptions {
  /** baseUrl is the server, http:// or https://. */
  readonly baseUrl: string;
  /** tls trusts `ca` for https (else the system's CAs) and presents a client certificate (mTLS); PEM. */
  readonly tls?: ClientTls;
  /** header is sent on every call (an authorization token). */
  readonly header?: Readonly<Record<string, string>>;
  /** pingMs is how often the connection is PINGed, and how long an answer may take (LeanSession's 5 s by default). */
  readonly pingMs?: number;
  /** heldPingMs is how long a call may wait before its connection is PINGed (HeldCalls' 250 ms by default; tests set it longer). */
  readonly heldPingMs?: number;
}

/**
 * LeanGrpcTransport is a Transport that can be closed (its connection),
 * and that sends a call already encoded: `unaryBytes` takes the path and
 * the framed request and resolves with the response's message bytes, for
 * a caller that encodes and decodes by itself (the leader's etcd appends).
 */
export type LeanGrpcTransport = Transport & {
  unaryBytes(path: string, frame: Buffer, timeoutMs: number | undefined, header?: Readonly<Record<string, string>>): Promise<Buffer>;
  /** check PINGs the connection now and closes it, failing its calls, unless the answer comes within ms (LeanSession.check). */
  check(ms: number): void;
  /** drop closes the connection now, failing its calls (LeanSession.drop). */
  drop(): void;
  close(): void;
};

/**
 * createLeanGrpcTransport makes unary gRPC calls (identity encoding) on one
 * node:http2 connection to baseUrl, made again when it closes. Why by hand:
 * connect-node's gRPC transport was most of a relay's CPU (measured in
 * bench/README.md, the relay); its errors are still connect's own
 * (findTrailerError), and
 * test/client/lean-grpc-transport.test.ts holds its answers to
 * connect-node's. A broken connection, a refused one or a reset stream is
 * UNAVAILABLE (every call of this service is safe to send again); an HTTP
 * error without a gRPC status is gRPC's HTTP mapping (codeFromHttpStatus).
 */
export function createLeanGrpcTransport(options: LeanGrpcOptions): LeanGrpcTransport {
  const connection = new LeanSession(options.baseUrl, options.tls, options.pingMs, options.heldPingMs);
  return {
    unary: async (method, signal, timeoutMs, header, input) => {
      const path = `/${method.parent.typeName}/${method.name}`;
      const schema = method.input as DescMessage;
      const frame = encodeFramed(schema, create(schema, input as MessageInitShape<DescMessage>));
      const done = await exchange(connection, path, frame, signal, timeoutMs, { ...options.header, ...plainHeader(header) });
      const message = messageOf(done);
      const [head, trailer] = [webHeaders(done.head), webHeaders(done.trailers)];
      return { stream: false, service: method.parent, method, header: head, trailer, message: fromBinary(method.output, message) } as never;
    },
    unaryBytes: async (path, frame, timeoutMs, header) =>
      messageOf(await exchange(connection, path, frame, undefined, timeoutMs, { ...options.header, ...header })),
    stream: () => Promise.reject(new ConnectError("the lean gRPC transport makes unary calls only", Code.Unimplemented)),
    check: (ms) => connection.check(ms),
    drop: () => connection.drop(),
    close: () => connection.close(),
  };
}

/** Exchange is a finished call as the stream saw it: its header and trailer blocks, its data, why it broke if it did. */
interface Exchange {
  head: http2.IncomingHttpHeaders | undefined;
  trailers: http2.IncomingHttpHeaders | undefined;
  chunks: Buffer[];
  failed: ConnectError | undefined;
  rstCode: number;
}

/** exchange sends one framed request on a connection and resolves once its stream closed, however it ended. */
function exchange(
  connection: LeanSession,
  path: string,
  frame: Buffer,
  signal: AbortSignal | undefined,
  timeoutMs: number | undefined,
  header: Record<string, string>,
): Promise<Exchange> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(new ConnectError("the call was canceled", Code.Canceled));
    const stream = connection.call({
      ":method": "POST",
      ":path": path,
      "content-type": "application/grpc+proto",
      te: "trailers",
      ...(timeoutMs === undefined ? {} : { "grpc-timeout": `${Math.max(1, Math.ceil(timeoutMs))}m` }),
      ...header,
    });
    const done: Exchange = { head: undefined, trailers: undefined, chunks: [], failed: undefined, rstCode: 0 };
    const fail = (error: ConnectError) => {
      done.failed ??= error;
      stream.close(http2.constants.NGHTTP2_CANCEL);
    };
    const timer =
      timeoutMs === undefined ? undefined : setTimeout(() => fail(new ConnectError("the call's deadline passed", Code.DeadlineExceeded)), timeoutMs);
    const onAbort = () => fail(new ConnectError("the call was canceled", Code.Canceled));
    signal?.addEventListener("abort", onAbort, { once: true });
    stream.on("response", (headers) => (done.head = headers));
    stream.on("trailers", (headers) => (done.trailers = headers));
    stream.on("data", (chunk: Buffer) => done.chunks.push(chunk));
    stream.on("error", (error: Error) => (done.failed ??= new ConnectError(`the connection to the server broke: ${error.message}`, Code.Unavailable)));
    stream.once("close", () => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
      done.rstCode = stream.rstCode;
      resolve(done);
    });
    stream.end(frame);
  });
}

/** messageOf reads a finished call: its message's bytes, or its error (connect's, from the status headers, with the headers and trailers as metadata). */
function messageOf({ head, trailers, chunks, failed, rstCode }: Exchange): Buffer {
  if (failed !== undefined) throw failed;
  const status = (trailers ?? head)?.["grpc-status"];
  if (status === undefined) {
    const http = Number(head?.[":status"] ?? 0);
    const why = head === undefined ? "no answer" : `HTTP status ${http} without a gRPC status`;
    // An HTTP error is what gRPC's mapping says (404: a server without the method, an older version: UNIMPLEMENTED), as
    // connect-node's transport reads it; no answer, or a 200 cut short, is a broken call: UNAVAILABLE, sent again.
    const code = head === undefined || http === 200 || rstCode !== 0 ? Code.Unavailable : codeFromHttpStatus(http);
    throw new ConnectError(`the server gave ${why} (stream reset ${rstCode})`, code);
  }
  if (status !== "0") {
    const all = webHeaders(head);
    for (const [key, value] of webHeaders(trailers)) all.append(key, value);
    throw findTrailerError(all) ?? new ConnectError(`grpc-status ${status}`, Code.Unknown, all);
  }
  const message = onlyMessage(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks));
  if (message === undefined) throw new ConnectError("the server's answer is not one uncompressed gRPC message", Code.Internal, webHeaders(head));
  return message;
}

/** webHeaders are an HTTP/2 header block as Headers, without its pseudo-headers. */
function webHeaders(block: http2.IncomingHttpHeaders | undefined): Headers {
  const headers = new Headers();
  for (const [name, value] of Object.entries(block ?? {})) {
    if (name.startsWith(":") || value === undefined) continue;
    for (const one of Array.isArray(value) ? value : [value]) headers.append(name, one);
  }
  return headers;
}

/** plainHeader is a call's HeadersInit as a plain object of lower-case names. */
function plainHeader(header: ConstructorParameters<typeof Headers>[0]): Record<string, string> {
  if (header === undefined) return {};
  const out: Record<string, string> = {};
  for (const [key, value] of new Headers(header)) out[key] = value;
  return out;
}
