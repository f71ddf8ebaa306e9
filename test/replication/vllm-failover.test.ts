import { afterEach, describe, expect, it } from "vitest";
import { lacking } from "../support/debian-packages.js";
import { VllmWorker } from "../support/engine-clients.js";
import { startEtcdCluster } from "../support/etcd-cluster.js";
import { kill9, restartServer, type Server, startServer, waitForLeader } from "../support/ha-cluster.js";

const missing = lacking("the vLLM failover test", "etcd", "requests");

describe.skipIf(missing !== "")("high availability on etcd: an unmodified vLLM client rides through failovers", () => {
  let servers: Server[] = [];
  afterEach(() => {
    servers = [];
  });

  it("kill -9 of the leader, restarted at once by its supervisor, twice: the client (given one member) sees no error and no confirmed key is lost", async () => {
    const etcd = await startEtcdCluster(3);
    servers = await Promise.all([0, 1, 2].map(() => startServer(etcd)));
    const first = await waitForLeader(servers);
    // The client knows one member, a standby: it follows the standby's redirects to the leader.
    const worker = VllmWorker.start(servers.find((s) => s !== first)!.url, 2, 4_096, 0);
    await worker.progress(5);
    for (let round = 0; round < 2; round++) {
      const leader = await waitForLeader(servers);
      await kill9(leader);
      await restartServer(leader);
      await worker.progress(5);
    }
    const summary = await worker.stop();
    console.log(`vLLM-policy worker across 2 failovers: ${JSON.stringify({ ...summary, errors: summary.errors.length })}`);
    expect(summary.errors).toEqual([]);
    expect(summary.lost).toBe(0);
    expect(summary.confirmed).toBeGreaterThanOrEqual(15);
  }, 120_000);
});
