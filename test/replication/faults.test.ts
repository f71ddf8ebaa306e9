import { ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { AllocationStatus } from "../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { createMetadataClient, type MetadataClient } from "../../src/client/index.js";
import { lacking } from "../support/debian-packages.js";
import { startEtcdCluster } from "../support/etcd-cluster.js";
import { kill9, restartServer, type Server, startServer, waitForConvergence, waitForLeader } from "../support/ha-cluster.js";

const missing = lacking("the randomized fault test", "etcd");

/** FAULT_SECONDS is how long faults are injected: short in npm test, long with `npm run bench:faults`. */
const FAULT_SECONDS = Number(process.env.FAULT_SECONDS ?? "12");
/** SEED picks the faults; a failure prints it, and FAULT_SEED=<seed> replays the same choices. */
const SEED = Number(process.env.FAULT_SEED ?? Math.floor(Math.random() * 2 ** 31));
const NS = "faults";

/** random is a small seeded generator (mulberry32): the same seed, the same faults. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

/** writer loops BatchAllocate → ConfirmWrite of 2 new keys until stop, recording every confirmation acknowledged. */
async function writer(client: MetadataClient, id: number, confirmed: Map<string, number>, errors: string[], stop: () => boolean): Promise<void> {
  for (let i = 0; !stop(); i++) {
    const keys = [`w${id}-${i}-a`, `w${id}-${i}-b`];
    try {
      const res = await client.batchAllocate({ namespace: NS, rank: 0, keys });
      const mine = keys.flatMap((key, k) => (res.statuses[k] === AllocationStatus.NEW ? [[key, res.pages[k]!] as const] : []));
      await client.confirmWrite({ namespace: NS, rank: 0, keys: mine.map(([key]) => key), pages: mine.map(([, page]) => page) });
      for (const [key, page] of mine) confirmed.set(key, page);
    } catch (error) {
      errors.push(`${keys[0]}: ${ConnectError.from(error).message}`);
    }
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe.skipIf(missing !== "")("high availability under randomized faults", () => {
  it(
    `kill -9 and SIGSTOP of servers and etcd members, under 4 writers (seed ${SEED}): every acknowledged write is there, members converge`,
    async () => {
      const next = random(SEED);
      const pick = <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)]!;
      const etcd = await startEtcdCluster(3);
      const servers: Server[] = await Promise.all([0, 1, 2].map(() => startServer(etcd)));
      await waitForLeader(servers);
      const client = createMetadataClient({ baseUrl: servers.map((s) => s.url).join(","), retry: { deadlineMs: 30_000 } });
      await client.initializeRank({ namespace: NS, rank: 0, numPages: 1 << 20, worldSize: 1 });

      const confirmed = new Map<string, number>();
      const errors: string[] = [];
      let stopping = false;
      const writers = [0, 1, 2, 3].map((id) => writer(client, id, confirmed, errors, () => stopping));
      const faults: string[] = [];
      const until = Date.now() + FAULT_SECONDS * 1_000;
      while (Date.now() < until) {
        await sleep(300 + next() * 700);
        const fault = pick(["kill server", "kill leader", "pause server", "kill etcd", "pause etcd"] as const);
        if (fault === "kill server" || fault === "kill leader") {
          const victim = fault === "kill leader" ? await waitForLeader(servers) : pick(servers);
          await kill9(victim);
          await sleep(next() * 1_000);
          await restartServer(victim);
        } else if (fault === "pause server") {
          const victim = pick(servers);
          victim.process.child.kill("SIGSTOP");
          await sleep(300 + next() * 2_500);
          victim.process.child.kill("SIGCONT");
        } else if (fault === "pause etcd") {
          const victim = pick(etcd.members).process!;
          victim.kill("SIGSTOP");
          await sleep(300 + next() * 2_500);
          victim.kill("SIGCONT");
        } else {
          const victim = pick(etcd.members);
          await victim.kill();
          await sleep(next() * 1_500);
          await victim.start();
        }
        faults.push(fault);
      }
      // After the faults: the writers make progress again, then stop.
      const before = confirmed.size;
      const deadline = Date.now() + 20_000;
      while (confirmed.size <= before && Date.now() < deadline) await sleep(50);
      stopping = true;
      await Promise.all(writers);
      console.log(`seed ${SEED}: ${faults.length} faults (${faults.join(", ")}); ${confirmed.size} keys confirmed, ${errors.length} calls failed`);

      expect(confirmed.size).toBeGreaterThan(before);
      // Every acknowledged confirmation is there, on its page, and no page holds two keys.
      const keys = [...confirmed.keys()];
      const { pages } = await client.getLocations({ namespace: NS, rank: 0, keys });
      expect(pages).toEqual(keys.map((k) => confirmed.get(k)));
      expect(new Set(pages).size).toBe(pages.length);
      // Every member's store restores to a state that keeps every invariant, and they converge.
      const converged = await waitForConvergence(
        servers.map((s) => s.dataDir),
        30_000,
      );
      expect(converged.records.filter((r) => r.includes('"kind":"key"')).length).toBeGreaterThanOrEqual(keys.length);
    },
    60_000 + FAULT_SECONDS * 4_000,
  );
});
