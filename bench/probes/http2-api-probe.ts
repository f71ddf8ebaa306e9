// http2-api-probe.ts: does answering gRPC on node:http2's raw `stream` API
// cost the server less CPU than its compatibility request/response API
// (which the fast path uses)? Two bare servers answer every call with the
// same fixed gRPC response; the lean client drives each in turn, alternating,
// at B=1, C=16. Run: node --import tsx bench/probes/http2-api-probe.ts
// (`... http2-api-probe.ts serve compat|stream` is one of the servers.)
import * as http2 from "node:http2";
import type { LoadConfig, LoadResult } from "../harness/load.js";
import { runLoad, startProcess } from "../harness/processes.js";

type Api = "compat" | "stream";

/** A BatchAllocateResponse of one page (field 1) and one status (field 2), in its gRPC frame. */
const ANSWER = Buffer.from([0, 0, 0, 0, 6, 0x0a, 0x01, 0x01, 0x12, 0x01, 0x01]);
const HEADERS = { "content-type": "application/grpc+proto" };
const TRAILERS = { "grpc-status": "0" };

function serve(api: Api): void {
  const server = http2.createServer({ settings: { initialWindowSize: 1 << 20 } });
  if (api === "stream") {
    server.on("stream", (stream) => {
      stream.on("data", () => undefined);
      stream.on("end", () => {
        stream.respond({ ":status": 200, ...HEADERS }, { waitForTrailers: true });
        stream.once("wantTrailers", () => stream.sendTrailers(TRAILERS));
        stream.end(ANSWER);
      });
    });
  } else {
    server.on("request", (req: http2.Http2ServerRequest, res: http2.Http2ServerResponse) => {
      req.on("data", () => undefined);
      req.on("end", () => {
        res.writeHead(200, HEADERS);
        res.addTrailers(TRAILERS);
        res.end(ANSWER);
      });
    });
  }
  server.listen(0, "127.0.0.1", () => {
    const { port } = server.address() as { port: number };
    console.log(JSON.stringify({ msg: "listening", url: `http://127.0.0.1:${port}` }));
  });
  process.once("SIGTERM", () => process.exit(0));
}

async function compare(): Promise<void> {
  for (const api of ["compat", "stream", "compat", "stream"] as Api[]) {
    const server = await startProcess("bench/probes/http2-api-probe.ts", ["serve", api]);
    const config: LoadConfig = {
      url: server.url,
      transport: "lean-grpc",
      batch: 1,
      concurrency: 16,
      connections: 2,
      ranks: 8,
      numPages: 1_000,
      warmupMs: 500,
      durationMs: 3_000,
      keyOffset: 0,
    };
    const { result, serverCpuMs } = await runLoad<LoadResult>(config, server.pid);
    await server.stop();
    const calls = result.cycles * 4;
    console.log(`${api.padEnd(6)} ${calls} calls, server ${((serverCpuMs * 1_000) / calls).toFixed(1)} µs CPU per call`);
  }
}

if (process.argv[2] === "serve") serve(process.argv[3] as Api);
else await compare();
