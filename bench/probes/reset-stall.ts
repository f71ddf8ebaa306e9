// reset-stall.ts [--keys=N] [--rounds=R] [--entries=A,B] [--call=reset|drop-rank]: what a reset of a large namespace costs the
// other callers of a cluster. Each round starts 3 etcd members and 3 servers, confirms N keys (100,000)
// on 2 ranks of namespace "big", then, while a writer allocates and confirms 16 keys at a time in
// namespace "load" and a probe asks the leader's health every 10 ms, runs `hf3fs-metadata reset --force
// --namespace big` against a standby. It prints the reset's time, the longest health probe and the
// longest write while it ran, and whether the leader kept its place. `--entries` names server entry
// points to alternate (A against B, as bench/README.md asks), relative to the checkout: another
// worktree's `../old/src/cli/main.ts` measures the code before a change. `--call=drop-rank` makes the
// call a DropRank of rank 1 (through the standby, by the client) instead: the drop of one rank of two.
// Run: node --import tsx bench/probes/reset-stall.ts
import { spawn } from "node:child_process";
import { createHealthClient, createMetadataClient } from "../../src/client/index.js";
import { leaderOf, startHaCluster } from "../harness/ha.js";
import { option } from "../harness/options.js";
import { SERVER, serverArgs } from "../harness/processes.js";

const KEYS = Number(option("keys", "100000"));
const rounds = Number(option("rounds", "2"));
const entries = option("entries", SERVER).split(",");
const call = option("call", "reset");
const BIN = new URL("../../src/cli/bin.mjs", import.meta.url).pathname;

/** cli runs the checkout's CLI, resolving with its exit code and its output. */
function cli(args: string[]): Promise<{ code: number | null; out: string }> {
  const child = spawn(process.execPath, [BIN, ...args], { stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  child.stdout.on("data", (d) => (out += d));
  child.stderr.on("data", (d) => (out += d));
  return new Promise((resolve) => child.on("close", (code) => resolve({ code, out: out.trim() })));
}

/** timed keeps the longest of the calls it times, and counts their failures. */
function timer() {
  const t = { longestMs: 0, calls: 0, failures: 0 };
  return {
    t,
    async time(call: () => Promise<unknown>) {
      const started = performance.now();
      try {
        await call();
      } catch {
        t.failures++;
      }
      t.calls++;
      t.longestMs = Math.max(t.longestMs, performance.now() - started);
    },
  };
}

for (let round = 1; round <= rounds; round++) {
  for (const entry of entries) {
    const cluster = await startHaCluster(entry, serverArgs);
    try {
      const leader = await leaderOf(cluster);
      const standby = cluster.members.find((m) => m !== leader)!;
      const client = createMetadataClient({ baseUrl: leader.process.url });
      for (const namespace of ["big", "load"])
        for (const rank of [0, 1]) await client.initializeRank({ namespace, rank, numPages: KEYS + 1_000, worldSize: 2 });
      for (let at = 0; at < KEYS; at += 2_000) {
        const keys = Array.from({ length: Math.min(2_000, KEYS - at) }, (_, i) => `big-${at + i}`);
        for (const rank of [0, 1]) {
          const { pages } = await client.batchAllocate({ namespace: "big", rank, keys });
          await client.confirmWrite({ namespace: "big", rank, keys, pages });
        }
      }
      const health = createHealthClient({ baseUrl: leader.process.url });
      const probes = timer();
      const writes = timer();
      let running = true;
      const probing = (async () => {
        while (running) {
          await probes.time(() => health.check({}));
          await new Promise((resolve) => setTimeout(resolve, 10));
        }
      })();
      const writing = (async () => {
        for (let i = 0; running; i++) {
          const keys = Array.from({ length: 16 }, (_, k) => `load-${i}-${k}`);
          await writes.time(async () => {
            const { pages } = await client.batchAllocate({ namespace: "load", rank: 0, keys });
            await client.confirmWrite({ namespace: "load", rank: 0, keys, pages });
          });
        }
      })();
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      const started = performance.now();
      const reset =
        call === "drop-rank"
          ? await createMetadataClient({ baseUrl: standby.process.url })
              .dropRank({ namespace: "big", rank: 1 })
              .then(
                () => ({ code: 0, out: "" }),
                (e: Error) => ({ code: 1, out: e.message }),
              )
          : await cli(["reset", "--server", standby.process.url, "--namespace", "big", "--force"]); // filled seconds ago: in use
      const resetMs = performance.now() - started;
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      running = false;
      await Promise.all([probing, writing]);
      const after = await leaderOf(cluster);
      const line = [
        `round ${round} ${entry}: ${call === "drop-rank" ? "DropRank of rank 1 of 2" : "reset"} of ${KEYS.toLocaleString("en-US")} keys on 2 ranks exit ${reset.code} in ${Math.round(resetMs)} ms`,
        `longest health probe ${Math.round(probes.t.longestMs)} ms (${probes.t.calls}, ${probes.t.failures} failed)`,
        `longest write ${Math.round(writes.t.longestMs)} ms (${writes.t.calls}, ${writes.t.failures} failed)`,
        after === leader ? "same leader" : "the leader changed",
      ];
      console.log(line.join("; "));
      if (reset.code !== 0) console.log(`  reset said: ${reset.out}`);
    } finally {
      await cluster.stop();
    }
  }
}
