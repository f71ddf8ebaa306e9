// leader-rewrite.ts [--keys=N] [--rounds=R]: what a leader pays when its last standby dies, and it must write its state,
// which it kept no copy of while a standby did, whole to its store. Per round: 3 etcd members and 3 servers; N keys
// (200,000) written in calls of 128; 5 s later (the leader copies nothing by then) a reader calls BatchExists of 128
// keys on the leader back to back; 2 s later both standbys are killed with -9. Prints the time from the kill to the
// leader's "the leader's store holds the state", the leader's CPU in that time, the records it wrote and how long it
// listed them, and the reader's p99 and longest call in that time against the 2 s before.
// Run: node --import tsx bench/probes/leader-rewrite.ts
import { createMetadataClient } from "../../src/client/index.js";
import { leaderOf, startHaCluster } from "../harness/ha.js";
import { option } from "../harness/options.js";
import { cpuMs, SERVER, serverArgs } from "../harness/processes.js";

const keys = Number(option("keys", "200000"));
const rounds = Number(option("rounds", "1"));
const B = 128;

/** within waits for a server's log line up to a minute, and says which it waited for if it never came. */
function within<T>(what: string, promise: Promise<T>): Promise<T> {
  return Promise.race([promise, new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`no "${what}" within 60 s`)), 60_000).unref())]);
}

/** quantile is the q-quantile of the durations (ms). */
function quantile(durations: number[], q: number): number {
  const sorted = [...durations].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0;
}

for (let round = 0; round < rounds; round++) {
  const cluster = await startHaCluster(SERVER, serverArgs, 3);
  try {
    const leader = await leaderOf(cluster);
    const client = createMetadataClient({ baseUrl: leader.process.url });
    await client.initializeRank({ namespace: "rw", rank: 0, numPages: keys, worldSize: 1 });
    for (let i = 0; i < keys; i += B) {
      const batch = Array.from({ length: Math.min(B, keys - i) }, (_, j) => `rewrite-key-${i + j}`);
      const { pages } = await client.batchAllocate({ namespace: "rw", rank: 0, keys: batch });
      await client.confirmWrite({ namespace: "rw", rank: 0, keys: batch, pages });
    }
    await new Promise((r) => setTimeout(r, 5_000));
    if ((await leaderOf(cluster)) !== leader) throw new Error("the leader changed while the keys were written: run again");
    await within("a standby keeps the state", leader.process.logged("cluster: a standby keeps the state; the leader stops copying it to its store"));
    const calls: { at: number; ms: number }[] = [];
    let reading = true;
    const reader = (async () => {
      for (let i = 0; reading; i = (i + B) % keys) {
        const at = performance.now();
        await client.batchExists({ namespace: "rw", keys: Array.from({ length: B }, (_, j) => `rewrite-key-${(i + j) % keys}`) });
        calls.push({ at, ms: performance.now() - at });
      }
    })();
    await new Promise((r) => setTimeout(r, 2_000));
    const killedAt = performance.now();
    const cpu0 = cpuMs(leader.process.pid);
    for (const m of cluster.members) if (m !== leader) process.kill(m.process.pid, "SIGKILL");
    const listed = await within(
      "no standby keeps the state",
      leader.process.logged("cluster: no standby keeps the state; the leader writes it whole to its store"),
    );
    const written = await within("the leader's store holds the state", leader.process.logged("cluster: the leader's store holds the state"));
    const tookMs = performance.now() - killedAt;
    const leaderMs = cpuMs(leader.process.pid) - cpu0;
    reading = false;
    await reader;
    const before = calls.filter((c) => c.at < killedAt).map((c) => c.ms);
    const during = calls.filter((c) => c.at >= killedAt).map((c) => c.ms);
    console.log(
      `round ${round}: ${listed.records} records (listed in ${listed.listMs} ms), written ${written.tookMs} ms after the decision, ` +
        `${Math.round(tookMs)} ms after the kill; the leader's CPU meanwhile ${Math.round(leaderMs)} ms; ` +
        `BatchExists of ${B}: p99 ${quantile(during, 0.99).toFixed(1)} ms, longest ${Math.max(...during).toFixed(1)} ms (${during.length} calls) ` +
        `against p99 ${quantile(before, 0.99).toFixed(1)}, longest ${Math.max(...before).toFixed(1)} ms before`,
    );
  } finally {
    await cluster.stop();
  }
}
