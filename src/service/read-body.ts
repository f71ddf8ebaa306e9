import type { Readable } from "node:stream";
import { Code, ConnectError } from "@connectrpc/connect";

/** BodyStream is a request body as Node's HTTP/1.1 and HTTP/2 servers give it. */
export type BodyStream = Readable & { readonly headers: Record<string, string | string[] | undefined> };

/**
 * readBody reads a whole request body of at most maxBytes. Past the limit
 * (by its content-length, or as it arrives) it fails at once with
 * RESOURCE_EXHAUSTED and discards the rest unread; a client that goes away
 * mid-body fails it with CANCELED.
 */
export function readBody(body: BodyStream, maxBytes: number): Promise<Buffer> {
  const tooLarge = () => new ConnectError(`request body larger than ${maxBytes} bytes`, Code.ResourceExhausted);
  if (Number(body.headers["content-length"] ?? 0) > maxBytes) {
    body.resume();
    return Promise.reject(tooLarge());
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const done = () => {
      body.off("data", onData);
      body.off("end", onEnd);
      body.off("error", onError);
      body.off("close", onClose);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size <= maxBytes) return void chunks.push(chunk);
      done();
      body.resume();
      reject(tooLarge());
    };
    const onEnd = () => {
      done();
      resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size));
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
