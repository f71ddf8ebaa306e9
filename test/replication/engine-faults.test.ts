import { describe, expect, it } from "vitest";
import { seededRandom } from "../../bench/harness/random.js";
import { PORT_IN_USE } from "../../src/cli/listen-early.js";
import { spawnChildRelay, startChildRelay } from "../support/child-server.js";
import { lacking } from "../support/debian-packages.js";
import { type Engine, engines } from "../support/engine-clients.js";
import { startEtcdCluster } from "../support/etcd-cluster.js";
import { kill9, readyMember, restartServer, type Server, startServer, waitForLeader, waitForStandbys } from "../support/ha-cluster.js";
import { pause } from "../support/pause.js";
import { activationSocket } from "../support/socket-activation.js";
import { freePort } from "../support/test-server.js";

const missing = lacking("the engines' fault test", "etcd", "requests");

/** SECONDS is how long faults are made (ENGINE_FAULT_SECONDS to run longer); SEED picks them (FAULT_SEED to replay a run). */
const SECONDS = Number(process.env.ENGINE_FAULT_SECONDS ?? 60);
const SEED = Number(process.env.FAULT_SEED ?? Math.floor(Math.random() * 2 ** 31));

/** REST_MS is how long a group rests after its fault is over (the process back), longer than an engine's 1.8 s of retries. */
const REST_MS = 2_000;
/** TIMEOUT_MS gives the checks after the faults 5 minutes, and a run of 5 minutes of faults or less 10 in all. */
const TIMEOUT_MS = Math.max(600_000, (SECONDS + 300) * 1_000);
const SHARDS = 2;
const CLUSTER = "faults";
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Fault is what a machine or an operator does to one process, and what
 * brings it back: it resolves once the process is up again (a member
 * ready and its shard led). `group` is what it takes down for that long:
 * a shard, etcd or a relay; one fault at a time in each, then REST_MS, so
 * that a shard keeps two members of three and etcd its quorum.
 */
interface Fault {
  name: string;
  group: string;
  run(): Promise<string>;
}

describe.skipIf(missing !== "")("both engines, each through its relay, in front of 2 shards of 3 members on 3 etcd members", () => {
  it(
    `ride through faults made at random, several at once (seed ${SEED}): members stopped by SIGTERM, killed or paused, relays restarted as systemd and a DaemonSet's surge restart them, etcd members restarted or paused; no error, nothing stored lost`,
    async () => {
      const next = seededRandom(SEED);
      const pick = <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)]!;
      const etcd = await startEtcdCluster(3);
      const args = (shard: number) => ["--cluster-name", CLUSTER, "--shards", String(SHARDS), "--shard", String(shard)];
      const shards: Server[][] = await Promise.all(
        Array.from({ length: SHARDS }, (_, shard) => Promise.all([0, 1, 2].map(() => startServer(etcd, undefined, args(shard))))),
      );
      await Promise.all(shards.map((members) => waitForLeader(members)));
      // A relay per engine, each model in its own namespace: vLLM's keys complete on every rank, SGLang's kept per rank.
      // Each is restarted as the shipped units do it: vLLM's on the socket systemd keeps (deploy/systemd), SGLang's as a
      // DaemonSet's surge replaces it (deploy/kubernetes). A plain restart refuses connections until the next relay listens,
      // which under this test's load came near the end of vLLM's retries (docs/engines.md; engine-restarts.test.ts has it).
      const upstream = shards.map((members) => members.map((m) => m.url).join(",")).join(";");
      const socket = await activationSocket();
      const systemd = ["--upstream", upstream, "--port", String(socket.port), "--vllm-namespace", "llama"];
      const surge = ["--upstream", upstream, "--port", String(await freePort()), "--port-wait", "60s"];
      const relays = [
        { how: "systemd", args: systemd, process: await startChildRelay(systemd, {}, socket.wrapper) },
        { how: "surge", args: surge, process: await startChildRelay(surge) },
      ];
      const running: Engine[] = await Promise.all(engines(1).map(([, start], i) => start(relays[i]!.process.url)));
      await Promise.all(running.map((engine) => engine.progress(3)));

      /** back waits until a shard's member is ready (loaded, caught up) and the shard has one leader, as a rollout waits. */
      const back = async (shard: number, member: Server) => {
        await readyMember(member);
        await waitForLeader(shards[shard]!);
      };
      /** pausedAWhile stops a process (SIGSTOP) for 1-3 s, as a stalled machine, then continues it. */
      const pausedAWhile = async (pid: number) => {
        await pause(pid);
        await sleep(1_000 + next() * 2_000);
        process.kill(pid, "SIGCONT");
      };
      const memberFault = (name: string, act: (shard: number, member: Server) => Promise<void>) =>
        shards.map(
          (members, shard): Fault => ({
            name,
            group: `shard ${shard}`,
            run: async () => {
              const member = pick(members);
              await act(shard, member);
              await back(shard, member);
              return member.url;
            },
          }),
        );
      const faults: Fault[] = [
        ...memberFault("a member stopped by SIGTERM and started again", async (_, member) => {
          member.process.child.kill("SIGTERM");
          expect(await member.process.exited, `${member.url} exits cleanly after SIGTERM: ${member.process.stderr}`).toBe(0);
          await restartServer(member);
        }),
        ...memberFault("a member killed (SIGKILL) and started again", async (_, member) => {
          await kill9(member);
          await restartServer(member);
        }),
        ...memberFault("a member paused (SIGSTOP) for 1-3 s", (_, member) => pausedAWhile(member.process.child.pid!)),
        ...relays.map(
          (relay, i): Fault => ({
            name:
              relay.how === "systemd"
                ? "a relay stopped by SIGTERM and started again on the socket systemd keeps"
                : "a relay replaced as a DaemonSet's surge replaces it: the next one waiting for the port, then the old one stopped by SIGTERM",
            group: `relay ${i}`,
            run: async () => {
              const ms = (from: number, to: number) => Math.round(to - from);
              const next = relay.how === "surge" ? spawnChildRelay(relay.args) : undefined;
              await next?.logged(PORT_IN_USE);
              const stopping = performance.now();
              relay.process.child.kill("SIGTERM");
              expect(await relay.process.exited, `the relay exits cleanly after SIGTERM: ${relay.process.stderr}`).toBe(0);
              const starting = performance.now();
              relay.process = await (next?.listening ?? startChildRelay(relay.args, {}, socket.wrapper));
              return `${relay.process.url}: exited ${ms(stopping, starting)} ms after SIGTERM, the next listening ${ms(starting, performance.now())} ms after`;
            },
          }),
        ),
        {
          name: "an etcd member stopped by SIGTERM and started again",
          group: "etcd",
          run: async () => {
            const member = pick(etcd.members);
            const { exit, stderr } = await member.stop();
            expect(["SIGTERM", "code 0"], `etcd exits cleanly after SIGTERM: ${stderr}`).toContain(exit);
            await member.start();
            return member.name;
          },
        },
        {
          name: "an etcd member paused (SIGSTOP) for 1-3 s",
          group: "etcd",
          run: async () => {
            const member = pick(etcd.members);
            await pausedAWhile(member.process!.pid!);
            return member.name;
          },
        },
      ];

      // A fault every 0.3-2 s in a group where none is under way, nor was for REST_MS: faults overlap across shards, etcd and
      // the relays, and a process is not restarted twice within one engine call's retries (two restarts of a relay 1 s
      // apart refused calls at both, past the 1.8 s that vLLM retries; no supervisor restarts so fast).
      const made: [number, string][] = [];
      const busy = new Map<string, number>(); // a group's fault under way (infinity), or when its rest ends
      const free = (group: string) => (busy.get(group) ?? 0) <= Date.now();
      const underway = new Set<Promise<void>>();
      let failed: unknown;
      const started = Date.now();
      while (Date.now() - started < SECONDS * 1_000 && failed === undefined) {
        await sleep(300 + next() * 1_700);
        const ready = faults.filter((f) => free(f.group));
        if (ready.length === 0) continue;
        const fault = pick(ready);
        busy.set(fault.group, Number.POSITIVE_INFINITY);
        const at = (Date.now() - started) / 1_000;
        const clock = new Date().toISOString().slice(11, 23);
        const done: Promise<void> = fault.run().then(
          (target) => {
            made.push([at, `${at.toFixed(1)} s (${clock} UTC): ${fault.name} (${target}, ${fault.group})`]);
            busy.set(fault.group, Date.now() + REST_MS);
            underway.delete(done);
          },
          (error: unknown) => {
            failed ??= new Error(`${at.toFixed(1)} s: ${fault.name} (${fault.group}) did not come back`, { cause: error });
          },
        );
        underway.add(done);
      }
      await Promise.all(underway);
      if (failed !== undefined) throw failed;
      await Promise.all(running.map((engine) => engine.progress(2)));
      const runs = await Promise.all(running.map((engine) => engine.stop()));
      console.log(
        `engines under faults, seed ${SEED} (FAULT_SEED to replay it): ${made.length} faults\n  ${made
          .sort(([a], [b]) => a - b)
          .map(([, line]) => line)
          .join("\n  ")}`,
      );
      for (const run of runs) {
        console.log(
          `  an engine: ${run.calls} calls (the longest ${run.longestCall}), ${run.refused} answered after a connection refused, ${run.stored} keys stored`,
        );
        expect(run.errors).toEqual([]);
        expect(run.refused, "a relay restarted on systemd's socket or by a surge refuses no connection").toBe(0);
        expect(await run.missing(relays[0]!.process.url)).toEqual([]);
        expect(run.stored).toBeGreaterThan(0);
      }
      // Each shard's standbys hold its log to the end, alike, and every member's store restores with every invariant.
      for (const [shard, members] of shards.entries()) {
        await waitForStandbys(etcd, members, { clusterName: `${CLUSTER}/shard-${shard}-of-${SHARDS}` });
      }
    },
    TIMEOUT_MS,
  );
});
