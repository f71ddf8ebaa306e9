// bare-proxy.ts: the least a relay on Node can do per call, the baseline of
// the relay's "p50 added" in `--only=relay`: it takes each HTTP/1.1 request,
// sends its path and body as they are over one HTTP/2 connection to the
// upstream (whose JSON routes answer HTTP/2 too), and answers with the
// upstream's status and body. No translation, no checks, no metrics: two
// HTTP exchanges and nothing else. Run: node --import tsx bench/harness/bare-proxy.ts UPSTREAM_URL
import * as http from "node:http";
import * as http2 from "node:http2";

const upstream = http2.connect(process.argv[2]!);
upstream.on("connect", (_session, socket) => (socket as import("node:net").Socket).setNoDelay(true));

const server = http.createServer({ noDelay: true, keepAlive: true }, (req, res) => {
  const chunks: Buffer[] = [];
  req.on("data", (chunk: Buffer) => chunks.push(chunk));
  req.on("end", () => {
    const body = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
    const call = upstream.request({ ":method": "POST", ":path": req.url ?? "/", "content-type": "application/json" });
    let status = 502;
    call.on("response", (headers) => (status = Number(headers[":status"])));
    const answer: Buffer[] = [];
    call.on("data", (chunk: Buffer) => answer.push(chunk));
    call.on("end", () => {
      const reply = Buffer.concat(answer);
      res.writeHead(status, reply.length === 0 ? {} : { "content-type": "application/json", "content-length": reply.length });
      res.end(reply);
    });
    call.end(body);
  });
});
server.listen(0, "127.0.0.1", () => {
  const { port } = server.address() as { port: number };
  console.log(JSON.stringify({ msg: "listening", url: `http://127.0.0.1:${port}` }));
});
process.once("SIGTERM", () => {
  upstream.close();
  server.close(() => process.exit(0));
});
