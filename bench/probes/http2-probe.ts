// http2-probe.ts: the cost of a bare node:http2 round trip on this machine
// (client and server in this one process, no protobuf, no gRPC), the floor
// under any Node gRPC server. Run: node --import tsx bench/probes/http2-probe.ts
import * as http2 from "node:http2";

const server = http2.createServer();
server.on("stream", (stream) => {
  stream.respond({ ":status": 200 });
  stream.end("ok");
});
await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
const { port } = server.address() as { port: number };
const client = http2.connect(`http://127.0.0.1:${port}`);
const call = () =>
  new Promise<void>((resolve, reject) => {
    const stream = client.request({ ":method": "POST", ":path": "/" });
    stream.on("data", () => undefined);
    stream.on("end", resolve);
    stream.on("error", reject);
    stream.end("x");
  });
for (const concurrency of [1, 16]) {
  let calls = 0;
  const started = performance.now();
  const cpu = process.cpuUsage();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() - started < 2_000) {
        await call();
        calls++;
      }
    }),
  );
  const used = process.cpuUsage(cpu);
  const seconds = (performance.now() - started) / 1_000;
  console.log(
    `concurrency ${concurrency}: ${Math.round(calls / seconds)} calls/s, ${Math.round((used.user + used.system) / calls)} µs CPU per call (client + server)`,
  );
}
client.close();
server.close();
