import type { Readable } from "node:stream";
import { Code, ConnectError } from "@connectrpc/connect";

/** BodyStream is a request body as Node's HTTP/1.1 and HTTP/2 servers give it. */
export type BodyStream = Readable & { readonly headers: Record<string, string | string[] | undefined> };

/**
 * readBody reads a whole request body of at most maxBytes. A body over the
 * limit (by its content-length, or as it arrives) is consumed to its end
 * without being kept, then fails with RESOURCE_EXHAUSTED: answering before
 * the end would leave the HTTP/2 stream half open. A client that goes away
 * mid-body fails it with CANCELED.
 */
export function readBody(body: BodyStream, maxBytes: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = Number(body.headers["content-length"] ?? 0) > maxBytes ? Number.POSITIVE_INFINITY : 0;
    const done = () => {
      body.off("data", onData);
      body.off("end", onEnd);
      body.off("error", onError);
      body.off("close", onClose);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size <= maxBytes) chunks.push(chunk);
      else chunks.length = 0;
    };
    const onEnd = () => {
      done();
      if (size > maxBytes) reject(new ConnectError(`request body larger than ${maxBytes} bytes`, Code.ResourceExhausted));
      else resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size));
    };
    const onError = (error: Error) => {
      done();
      reject(error);
    };
    const onClose = () => {
      done();
      reject(new ConnectError("the client closed the request before its end", Code.Canceled));
    };
    body.on("data", onData);
    body.once("end", onEnd);
    body.once("error", onError);
    body.once("close", onClose);
  });
}
