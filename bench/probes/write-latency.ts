// write-latency.ts [--seconds=S] [--batch=B] [--pause=P] [--rounds=R] [--entries=A,B]: a lone worker's write latency on
// an HA leader. Per round and entry: 3 etcd members and 3 servers of that build; one client, straight to the leader, writes
// as one vLLM worker does at a slow pace: BatchAllocate of B (64) new keys, ConfirmWrite of them, then a pause of P (50) ms,
// for S (15) seconds after 5 s of start-up; it prints the mean, p50 and p90 of the writes' latencies. Entries alternate
// round by round (--entries, default this checkout's only).
// Run: node --import tsx bench/probes/write-latency.ts --entries=src/cli/main.ts,../old/src/cli/main.ts
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { MetadataService } from "../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { leaderOf, startHaCluster } from "../harness/ha.js";
import { numberOption, option } from "../harness/options.js";
import { SERVER, serverArgs } from "../harness/processes.js";

const seconds = numberOption("seconds", 15);
const batch = numberOption("batch", 64);
const pauseMs = numberOption("pause", 50);
const rounds = numberOption("rounds", 1);
const entries = option("entries", SERVER).split(",");

for (let round = 0; round < rounds; round++) {
  for (const entry of round % 2 === 0 ? entries : [...entries].reverse()) {
    const cluster = await startHaCluster(entry, serverArgs, 3);
    try {
      const leader = await leaderOf(cluster);
      const client = createClient(MetadataService, createGrpcTransport({ baseUrl: leader.process.url }));
      await client.initializeRank({ namespace: "bench", rank: 0, numPages: 1 << 20, worldSize: 1 });
      await new Promise((resolve) => setTimeout(resolve, 5_000));
      const latencies: number[] = [];
      const timed = async <T>(call: () => Promise<T>): Promise<T> => {
        const started = performance.now();
        const answer = await call();
        latencies.push(performance.now() - started);
        return answer;
      };
      let next = 0;
      for (const end = performance.now() + seconds * 1_000; performance.now() < end; ) {
        const keys = Array.from({ length: batch }, () => `key-${next++}`);
        const { pages } = await timed(() => client.batchAllocate({ namespace: "bench", rank: 0, keys }));
        await timed(() => client.confirmWrite({ namespace: "bench", rank: 0, keys, pages }));
        await new Promise((resolve) => setTimeout(resolve, pauseMs));
      }
      latencies.sort((a, b) => a - b);
      const at = (q: number) => latencies[Math.floor(latencies.length * q)]!.toFixed(2);
      const mean = latencies.reduce((sum, ms) => sum + ms, 0) / latencies.length;
      console.log(`round ${round} ${entry}: ${latencies.length} writes, mean ${mean.toFixed(2)} ms, p50 ${at(0.5)}, p90 ${at(0.9)}`);
    } finally {
      await cluster.stop();
    }
  }
}
