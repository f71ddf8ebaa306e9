// etcd-append.ts [--appends=N] [--rounds=R] [--bytes=B]: what the leader's append costs its own process, through the etcd3
// client (grpc-js, protobufjs and etcd3's policies, as src/replication/log-writer.ts sends it) against the same
// transaction encoded by hand and sent on node:http2, alternated R (3) times, N (2,000) appends each, one at a time, of
// B (2,048) bytes, on one etcd member. It answered what a lean append client would save the leader (#42, #43; members now use one, src/server/etcd-lean-client.ts):
// the CPU of this process per append (process.cpuUsage), and the wall time. Both check the answer's `succeeded`.
// Run: node --import tsx bench/probes/etcd-append.ts
import * as http2 from "node:http2";
import { BinaryReader, BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import { Etcd3 } from "etcd3";
import { running, startEtcdCluster } from "../harness/etcd-process.js";
import { numberOption } from "../harness/options.js";

const appends = numberOption("appends", 2_000);
const rounds = numberOption("rounds", 3);
const size = numberOption("bytes", 2_048);

const cluster = await startEtcdCluster(1);
const endpoint = cluster.members[0]!.clientUrl;
const etcd = new Etcd3({ hosts: endpoint });
const leaderKey = Buffer.from("bench/leader");
await etcd.put(leaderKey).value("me");
const termRevision = (await etcd.kv.range({ key: leaderKey })).kvs[0]!.create_revision;
const value = Buffer.alloc(size, 7);
let seq = 0;

/** viaEtcd3 is the leader's append as log-writer.ts makes it. */
async function viaEtcd3(): Promise<boolean> {
  const key = Buffer.from(`bench/log/${seq++}`);
  const res = await etcd.kv.txn({
    compare: [
      { key: leaderKey, target: "Create", result: "Equal", create_revision: termRevision },
      { key, target: "Version", result: "Equal", version: 0 },
    ],
    success: [{ request_put: { key, value } }],
    failure: [{ request_range: { key: leaderKey } }, { request_range: { key } }],
  });
  return res.succeeded;
}

const session = http2.connect(endpoint);

/** txnBytes is the same TxnRequest, written field by field (etcd's rpc.proto). */
function txnBytes(key: Buffer): Uint8Array {
  const w = new BinaryWriter();
  w.tag(1, WireType.LengthDelimited).fork().tag(1, WireType.Varint).int32(0).tag(2, WireType.Varint).int32(1).tag(3, WireType.LengthDelimited).bytes(leaderKey);
  w.tag(5, WireType.Varint).int64(termRevision).join();
  w.tag(1, WireType.LengthDelimited).fork().tag(3, WireType.LengthDelimited).bytes(key).join(); // version == 0: both enums 0, version 0
  w.tag(2, WireType.LengthDelimited).fork().tag(2, WireType.LengthDelimited).fork().tag(1, WireType.LengthDelimited).bytes(key);
  w.tag(2, WireType.LengthDelimited).bytes(value).join().join();
  w.tag(3, WireType.LengthDelimited).fork().tag(1, WireType.LengthDelimited).fork().tag(1, WireType.LengthDelimited).bytes(leaderKey).join().join();
  w.tag(3, WireType.LengthDelimited).fork().tag(1, WireType.LengthDelimited).fork().tag(1, WireType.LengthDelimited).bytes(key).join().join();
  return w.finish();
}

/** viaHttp2 sends txnBytes as a unary gRPC call and reads TxnResponse.succeeded. */
function viaHttp2(): Promise<boolean> {
  const body = txnBytes(Buffer.from(`bench/log/${seq++}`));
  const frame = Buffer.alloc(5 + body.length);
  frame.writeUInt32BE(body.length, 1);
  frame.set(body, 5);
  return new Promise((resolve, reject) => {
    const stream = session.request({ ":method": "POST", ":path": "/etcdserverpb.KV/Txn", "content-type": "application/grpc", te: "trailers" });
    const chunks: Buffer[] = [];
    stream.on("data", (chunk: Buffer) => chunks.push(chunk));
    stream.on("error", reject);
    stream.on("end", () => {
      const message = Buffer.concat(chunks).subarray(5);
      const reader = new BinaryReader(message);
      let succeeded = false;
      while (reader.pos < reader.len) {
        const [field, wire] = reader.tag();
        if (field === 2) succeeded = reader.bool();
        else reader.skip(wire, field);
      }
      resolve(succeeded);
    });
    stream.end(frame);
  });
}

async function measure(name: string, append: () => Promise<boolean>): Promise<void> {
  for (let i = 0; i < 200; i++) if (!(await append())) throw new Error(`${name}: an append failed`);
  const cpu = process.cpuUsage();
  const start = performance.now();
  for (let i = 0; i < appends; i++) if (!(await append())) throw new Error(`${name}: an append failed`);
  const used = process.cpuUsage(cpu);
  const elapsed = performance.now() - start;
  console.log(
    `etcd-append ${name.padEnd(6)} ${appends} appends of ${size} B: ${((used.user + used.system) / appends) | 0} µs of this process's CPU each, ${((elapsed * 1_000) / appends).toFixed(0)} µs apart`,
  );
}

try {
  for (let round = 0; round < rounds; round++) {
    await measure("etcd3", viaEtcd3);
    await measure("http2", viaHttp2);
  }
} finally {
  session.close();
  etcd.close();
  for (const child of running) child.kill("SIGKILL");
}
