// keep-alive.ts [--count=N] [--rounds=R]: what a lease's keep-alive costs the member that sends it: etcd3's
// keepaliveOnce (a LeaseKeepAlive stream opened for each), KeepAliveStream (one etcd3 stream for all) and
// unaryKeepAlives (a stream of one request each on the lean client, as the members send them), alternated R (3)
// times, N (400) keep-alives one after the other each, to 3 etcd members. Prints this process's CPU per keep-alive
// (process.cpuUsage).
// Run: node --import tsx bench/probes/keep-alive.ts
import { etcdClient } from "../../src/replication/etcd-client.js";
import { KeepAliveStream } from "../../src/replication/keep-alive-stream.js";
import { unaryKeepAlives } from "../../src/replication/lease-keep-alive.js";
import { within } from "../../src/replication/within.js";
import { etcdLeanClient } from "../../src/server/etcd-lean-client.js";
import { running, startEtcdCluster } from "../harness/etcd-process.js";
import { numberOption } from "../harness/options.js";

const count = numberOption("count", 400);
const rounds = numberOption("rounds", 3);

const cluster = await startEtcdCluster(3);
const client = etcdClient({ hosts: cluster.members.map((m) => m.clientUrl), dialTimeout: 2_000 });
const lean = etcdLeanClient({ hosts: cluster.members.map((m) => m.clientUrl) });
try {
  const lease = client.lease(10, { autoKeepAlive: false });
  lease.on("lost", () => undefined);
  const id = await lease.grant();
  const stream = new KeepAliveStream(client, id);
  const unary = unaryKeepAlives(lean.keepAlive, id);
  const ways = {
    keepaliveOnce: () => lease.keepaliveOnce(within(1_000)),
    stream: () => stream.once(within(1_000)),
    lean: () => unary.once(within(1_000)),
  };
  for (let round = 0; round <= rounds; round++) {
    for (const [name, keepAlive] of Object.entries(ways)) {
      const cpu = process.cpuUsage();
      for (let i = 0; i < count; i++) await keepAlive();
      const used = process.cpuUsage(cpu);
      // Round 0 warms both up and is not printed.
      if (round > 0)
        console.log(`keep-alive ${name.padEnd(13)} round ${round}: ${((used.user + used.system) / count).toFixed(0)} µs of this process's CPU each`);
    }
  }
  stream.close();
} finally {
  client.close();
  lean.close();
  for (const child of running) child.kill("SIGKILL");
}
