import { ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { createMetadataClient } from "../../src/client/index.js";
import { UNREACHED_HEADER } from "../../src/protocol/headers.js";
import { NO_SNAPSHOT_SOURCE, SNAPSHOT_FAILED } from "../../src/replication/hot-standby.js";
import { startChildRelay } from "../support/child-server.js";
import { lacking } from "../support/debian-packages.js";
import { engines } from "../support/engine-clients.js";
import { startEtcdCluster } from "../support/etcd-cluster.js";
import { kill9, logEntry, memberRecords, readStored, restartServer, startServer, waitForLeader, waitForStandbys } from "../support/ha-cluster.js";
import { until } from "../support/until.js";

const missing = lacking("the power loss test", "etcd", "requests");

const NS = "power";

/** ENGINES are both engines, their readers idle 3 s between turns, on a node the power loss spares, behind its relay. */
const ENGINES = engines(3);

describe.skipIf(missing !== "")("high availability on etcd: a power loss", () => {
  // The old leader comes back at once (the others' records, put with their leases, still in etcd: it asks them), or once
  // those records lapsed (nobody to ask: it says it waits), as a slow restart does.
  const RESTARTS = ENGINES.map(([name, start], i) => [name, start, i === 0 ? "at once" : "once the others' records lapsed"] as const);
  it.each(RESTARTS)(
    "every etcd member and every server killed -9 at once, the old leader started first and alone: it serves nothing older than what was acknowledged; once the others are back every acknowledged write is there, and %s, through its relay, sees no error (the old leader back %s)",
    async (_, startEngine, when) => {
      const etcd = await startEtcdCluster(3);
      const servers = await Promise.all([0, 1, 2].map(() => startServer(etcd)));
      await waitForLeader(servers);
      const client = createMetadataClient({ baseUrl: servers.map((s) => s.url).join(",") });
      await client.initializeRank({ namespace: NS, rank: 0, numPages: 100_000, worldSize: 1 });
      const acknowledged = new Map<string, number>();
      const write = async (key: string) => {
        const { pages } = await client.batchAllocate({ namespace: NS, rank: 0, keys: [key] });
        await client.confirmWrite({ namespace: NS, rank: 0, keys: [key], pages });
        acknowledged.set(key, pages[0]!);
      };
      // Two log entries a write, until the log's start is compacted past what the leader's store holds (it copies
      // nothing while a standby keeps the state on its disk): the leader's store and the log alone then miss entries.
      for (let i = 0; i < 200; i++) await write(`k${i}`);
      await waitForStandbys(etcd, servers);
      const leader = await waitForLeader(servers);
      const stored = async () => (await readStored(leader.dataDir)).appliedSeq;
      while ((await logEntry(etcd, "first")) <= (await stored()) + 1) {
        expect(acknowledged.size, "writes before the log's start passed the leader's store").toBeLessThan(3_000);
        for (let i = 0; i < 100; i++) await write(`k${acknowledged.size}`);
      }
      const relay = await startChildRelay(["--upstream", servers.map((s) => s.url).join(",")]);
      const engine = await startEngine(relay.url);
      await engine.progress(3);
      const leaderStored = await stored();
      const logStart = await logEntry(etcd, "first");
      expect(leaderStored + 1, "the leader's store and the log alone miss entries").toBeLessThan(logStart);

      // The power goes: every process at once.
      await Promise.all([...servers.map(kill9), ...etcd.members.map((m) => m.kill())]);
      await Promise.all(etcd.members.map((m) => m.start()));
      if (when !== "at once") await until(async () => (await memberRecords(etcd)) === 0, 30_000);
      await restartServer(leader);
      // Alone, with a gap between its store and the log, it must not answer from what it has: an error, the truth, or
      // (knowing no leader for --read-hold) every key a miss, marked as no answer of its state (hf3fs-unreached).
      const alone = createMetadataClient({ baseUrl: leader.url, retry: { deadlineMs: 2_000 } });
      const keys = [...acknowledged.keys()];
      let mark: string | null = null;
      const early = await alone.batchExists({ namespace: NS, keys }, { timeoutMs: 2_000, onHeader: (h) => (mark = h.get(UNREACHED_HEADER)) }).then(
        (res) => res.exists.every(Boolean) || (mark === "1" && !res.exists.some(Boolean) ? "misses, marked" : false),
        (error) => ConnectError.from(error).message,
      );
      expect(early, "an answer of its state that some acknowledged key does not exist").not.toBe(false);

      // No other member could give it a snapshot: it asks those whose records etcd still holds (their leases run on after the
      // kill), less and less often, or, once none is left (a slow restart), waits for one; it keeps its store as it was.
      const asked = () => leader.process.lines.filter((l) => l.includes(SNAPSHOT_FAILED)).length;
      const waits = () => leader.process.lines.some((l) => l.includes(NO_SNAPSHOT_SOURCE));
      await until(() => asked() > 0 || waits(), 60_000);
      if (when !== "at once") expect([asked(), waits()], "no record to ask: it waits, and says so").toEqual([0, true]);
      expect((await readStored(leader.dataDir)).appliedSeq).toBe(leaderStored);
      await Promise.all(servers.filter((s) => s !== leader).map(restartServer));
      await waitForLeader(servers, 30_000);
      // Its calls waited at the relay (--hold) through the outage, and go on.
      await engine.progress(3);
      const run = await engine.stop();
      expect(run.errors).toEqual([]);
      expect(await run.missing(relay.url)).toEqual([]);
      const after = createMetadataClient({ baseUrl: servers.map((s) => s.url).join(",") });
      expect((await after.batchExists({ namespace: NS, keys })).exists.every(Boolean)).toBe(true);
      const locations = await after.getLocations({ namespace: NS, rank: 0, keys });
      expect(locations.pages).toEqual(keys.map((k) => acknowledged.get(k)));
      const converged = await waitForStandbys(etcd, servers, { timeoutMs: 30_000 });
      expect(converged.records.filter((r) => r.includes('"kind":"key"') && r.includes(`"namespace":"${NS}"`))).toHaveLength(acknowledged.size);
      console.log(
        `a power loss: ${acknowledged.size} writes acknowledged, the log from entry ${logStart}, the leader's store at ${leaderStored}; alone, the old leader answered ${early === true ? "the truth" : early === "misses, marked" ? "misses, marked" : `with an error (${early})`} and ${asked() > 0 ? `asked for a snapshot ${asked()} times` : "found no member up to ask for a snapshot"}; the engine made ${run.calls} calls (the longest ${run.longestCall}) and stored ${run.stored} keys`,
      );
    },
    180_000,
  );
});
