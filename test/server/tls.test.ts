import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import * as http2 from "node:http2";
import * as https from "node:https";
import * as net from "node:net";
import * as tls from "node:tls";
import { promisify } from "node:util";
import { Code, ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { type ClientTls, createMetadataClient } from "../../src/client/index.js";
import type { ListenerTls } from "../../src/framing/http/dual-protocol-listener.js";
import { type Certificates, makeCertificates } from "../support/certificates.js";
import { lacking } from "../support/debian-packages.js";
import { tempDir } from "../support/temp-dir.js";
import { startTestServer } from "../support/test-server.js";

const missing = lacking("the TLS tests", "openssl");

const read = (file: string) => readFileSync(file);

/** REFUSED is what a client sees when the TLS handshake or the connection fails (connect-node: INTERNAL, UNAVAILABLE, or CANCELED when TLS 1.3 sends the refusal after the handshake). */
const REFUSED = /^(Internal|Unavailable|Canceled): /;

function listenerTls(certs: Certificates, mutual: boolean): ListenerTls {
  return { cert: read(certs.serverCert), key: read(certs.serverKey), clientCa: mutual ? read(certs.ca) : undefined };
}

/** outcome makes one call and says "ok" or the error's code name and message. */
async function outcome(baseUrl: string, tls: ClientTls | undefined, protocol: "grpc" | "connect" = "grpc"): Promise<string> {
  const client = createMetadataClient({ baseUrl, tls, protocol, httpVersion: "1.1", retry: { deadlineMs: 0 } });
  return client.batchExists({ keys: ["k"] }).then(
    () => "ok",
    (e: unknown) => `${Code[ConnectError.from(e).code]}: ${ConnectError.from(e).rawMessage}`,
  );
}

describe.skipIf(missing !== "")("TLS on the port", () => {
  it("cuts a connection that stays silent, before or after the handshake, within --request-timeout, as the cleartext port does", async () => {
    const certs = makeCertificates(tempDir());
    const server = await startTestServer({}, undefined, 0, { tls: listenerTls(certs, false), requestTimeoutMs: 300 });
    const closed = (socket: net.Socket) =>
      new Promise<string>((resolve) => {
        socket.on("error", () => undefined);
        socket.once("close", () => resolve("closed"));
      });
    // Silent before the handshake: TCP only.
    const raw = net.connect(server.port, "127.0.0.1");
    // Silent after it: a TLS client that sends no byte of HTTP.
    const secure = tls.connect({ port: server.port, host: "127.0.0.1", ca: read(certs.ca), servername: "localhost", ALPNProtocols: ["h2"] });
    // Each close is listened for from the start: either socket may close first.
    const [rawClosed, secureClosed] = [closed(raw), closed(secure)];
    const limit = new Promise<string>((resolve) => setTimeout(() => resolve("still open"), 20_000).unref());
    expect(await Promise.race([rawClosed, limit])).toBe("closed");
    expect(await Promise.race([secureClosed, limit])).toBe("closed");
  });

  it("serves gRPC (h2 by ALPN), Connect and the JSON routes (HTTP/1.1) to clients that trust its CA, and nothing in cleartext", async () => {
    const certs = makeCertificates(tempDir());
    const server = await startTestServer({}, undefined, 0, { tls: listenerTls(certs, false) });
    expect(server.url).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
    const trusted = { ca: read(certs.ca) };
    expect(await outcome(server.url, trusted)).toBe("ok");
    expect(await outcome(server.url, trusted, "connect")).toBe("ok");
    expect(await outcome(server.url, undefined)).toMatch(/^Internal: unable to verify the first certificate/);
    // An insecure gRPC channel (h2c) gets UNAVAILABLE saying why, as does each of its streams; Connect over h2c gets 400 and the same line.
    const cleartext = server.url.replace("https:", "http:");
    expect(await outcome(cleartext, undefined)).toMatch(
      /^Unavailable: .*: this port speaks TLS only: use https:\/\/ \(and the CA that signed its certificate\)$/,
    );
    const h2c = await new Promise<string>((resolve, reject) => {
      const session = http2.connect(cleartext);
      session.on("error", reject);
      const stream = session.request({ ":method": "POST", ":path": "/keys/batch_exists", "content-type": "application/json" });
      let body = "";
      stream.on("response", (headers) => (body += `${headers[":status"]} `));
      stream.on("data", (d) => (body += d));
      stream.on("end", () => {
        session.close();
        resolve(body);
      });
      stream.end("{}");
    });
    expect(h2c).toBe("400 this port speaks TLS only: use https:// (and the CA that signed its certificate)\n");

    const json = await new Promise<string>((resolve, reject) => {
      const req = https.request(
        `${server.url}/keys/batch_exists`,
        { method: "POST", ca: trusted.ca, headers: { "content-type": "application/json" } },
        (res) => {
          let body = "";
          res.on("data", (d) => (body += d));
          res.on("end", () => resolve(`${res.statusCode} ${body}`));
        },
      );
      req.on("error", reject);
      req.end(JSON.stringify({ keys: ["k"] }));
    });
    expect(json).toBe('200 {"exists":[false]}');

    // A vLLM-like client speaking cleartext HTTP/1.1 to the TLS port gets a short answer saying so, not an empty reply.
    const plain = await fetch(`${server.url.replace("https:", "http:")}/keys/batch_exists`, { method: "POST", body: "{}" });
    expect([plain.status, await plain.text()]).toEqual([400, "this port speaks TLS only: use https:// (and the CA that signed its certificate)\n"]);

    const curl = await promisify(execFile)(
      "npx",
      [
        "buf",
        "curl",
        "--cacert",
        certs.ca,
        "--protocol",
        "grpc",
        "--schema",
        "proto",
        "--data",
        '{"keys": ["k"]}',
        `${server.url}/hf3fs.metadata.v1.MetadataService/BatchExists`,
      ],
      { encoding: "utf8" },
    );
    expect(JSON.parse(curl.stdout)).toEqual({ exists: [false] });
  });

  it("with a client CA, takes only client certificates it signed that have not expired", async () => {
    const certs = makeCertificates(tempDir());
    const server = await startTestServer({}, undefined, 0, { tls: listenerTls(certs, true) });
    const ca = read(certs.ca);
    expect(await outcome(server.url, { ca, cert: read(certs.clientCert), key: read(certs.clientKey) })).toBe("ok");
    expect(await outcome(server.url, { ca })).toMatch(REFUSED);
    expect(await outcome(server.url, { ca, cert: read(certs.otherClientCert), key: read(certs.otherClientKey) })).toMatch(REFUSED);
    expect(await outcome(server.url, { ca, cert: read(certs.expiredClientCert), key: read(certs.expiredClientKey) })).toMatch(REFUSED);
  });

  it("puts new certificates in place for new connections on reload", async () => {
    const first = makeCertificates(tempDir());
    const second = makeCertificates(tempDir());
    const server = await startTestServer({}, undefined, 0, { tls: listenerTls(first, false) });
    expect(await outcome(server.url, { ca: read(first.ca) })).toBe("ok");
    server.reloadTls(listenerTls(second, false));
    expect(await outcome(server.url, { ca: read(second.ca) })).toBe("ok");
    expect(await outcome(server.url, { ca: read(first.ca) })).toMatch(REFUSED);
  });
});
