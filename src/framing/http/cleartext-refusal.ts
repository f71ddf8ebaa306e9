import * as http2 from "node:http2";
import type * as net from "node:net";

/** TLS_ONLY is what a client speaking cleartext to the TLS port is told. */
export const TLS_ONLY = "this port speaks TLS only: use https:// (and the CA that signed its certificate)";

/** A connection that has been answered is cut this long after, whatever its peer does. */
const LINGER_MS = 1_000;

/** PLAIN_HTTP_ANSWER is the whole reply to a cleartext HTTP/1.1 request. */
const PLAIN_HTTP_ANSWER = `HTTP/1.1 400 Bad Request\r\ncontent-type: text/plain\r\ncontent-length: ${TLS_ONLY.length + 1}\r\nconnection: close\r\n\r\n${TLS_ONLY}\n`;

/**
 * CleartextRefusal answers what arrives in cleartext at the TLS port instead
 * of closing it without a word, then closes it: an HTTP/1.1 request (a vLLM
 * client given http://) gets 400 and TLS_ONLY; each stream of an HTTP/2
 * connection (h2c with prior knowledge, as an insecure gRPC channel speaks)
 * gets UNAVAILABLE with TLS_ONLY as its grpc-message when it is gRPC (the
 * code a gRPC client sees for a connection that fails, so retry policies
 * are unchanged, now with the cause), else 400.
 */
export class CleartextRefusal {
  private readonly h2 = http2.createServer();

  constructor() {
    this.h2.on("session", (session) => {
      session.on("error", () => session.destroy());
      setTimeout(() => session.destroy(), LINGER_MS).unref();
    });
    this.h2.on("stream", (stream, headers) => {
      stream.on("error", () => stream.destroy());
      const grpc = String(headers["content-type"] ?? "").startsWith("application/grpc");
      if (grpc) stream.respond({ ":status": 200, "content-type": "application/grpc", "grpc-status": "14", "grpc-message": TLS_ONLY }, { endStream: true });
      else {
        stream.respond({ ":status": 400, "content-type": "text/plain" });
        stream.end(`${TLS_ONLY}\n`);
      }
      stream.session?.close();
    });
  }

  /** http1 answers an HTTP/1.1 connection (its first bytes put back on the socket, unread). */
  http1(socket: net.Socket): void {
    socket.on("error", () => socket.destroy());
    socket.resume(); // read and drop the request: unread bytes at close would reset the connection before the answer is read
    socket.end(PLAIN_HTTP_ANSWER);
    socket.setTimeout(LINGER_MS, () => socket.destroy());
  }

  /** http2 answers an HTTP/2 connection (its preface put back on the socket). */
  http2(socket: net.Socket): void {
    socket.on("error", () => socket.destroy());
    this.h2.emit("connection", socket);
  }
}
