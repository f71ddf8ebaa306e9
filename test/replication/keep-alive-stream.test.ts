import { GRPCDeadlineExceededError, isRecoverableError } from "etcd3";
import { describe, expect, it } from "vitest";
import { etcdClient } from "../../src/replication/etcd-client.js";
import { KeepAliveStream } from "../../src/replication/keep-alive-stream.js";
import { within } from "../../src/replication/within.js";
import { lacking } from "../support/debian-packages.js";
import { startEtcdCluster } from "../support/etcd-cluster.js";
import { pause } from "../support/pause.js";

const missing = lacking("the lease keep-alive stream tests", "etcd");

describe.skipIf(missing !== "")("a lease's keep-alives on one stream", () => {
  it("are answered on one stream; one etcd leaves unanswered fails by its deadline, recoverable, and the next goes on a new stream", async () => {
    const etcd = await startEtcdCluster(1);
    const client = etcdClient({ hosts: etcd.endpoints.split(","), dialTimeout: 2_000 });
    let streams = 0;
    const open = client.leaseClient.leaseKeepAlive.bind(client.leaseClient);
    client.leaseClient.leaseKeepAlive = (options) => {
      streams++;
      return open(options);
    };
    try {
      const lease = client.lease(5, { autoKeepAlive: false });
      const keepAlives = new KeepAliveStream(client, await lease.grant());
      for (let i = 0; i < 10; i++) expect(await keepAlives.once(within(1_000))).toBe(5);
      expect(streams).toBe(1);
      // Several at once: each gets its own answer.
      const answers = await Promise.all([0, 1, 2].map(() => keepAlives.once(within(1_000))));
      expect(answers).toEqual([5, 5, 5]);
      const paused = etcd.members[0]!.process!;
      await pause(paused.pid!);
      try {
        const started = performance.now();
        const error = (await keepAlives.once(within(300)).catch((e: Error) => e)) as Error;
        expect(error).toBeInstanceOf(GRPCDeadlineExceededError);
        expect(isRecoverableError(error)).toBe(true);
        expect(performance.now() - started).toBeLessThan(1_000);
      } finally {
        paused.kill("SIGCONT");
      }
      expect(await keepAlives.once(within(2_000))).toBe(5);
      expect(streams).toBe(2);
      // A lease gone is answered TTL 0, which ends the session (EtcdSession).
      await lease.revoke();
      expect(await keepAlives.once(within(1_000))).toBe(0);
      keepAlives.close();
      await expect(keepAlives.once(within(1_000))).rejects.toThrow(/stopped/);
    } finally {
      client.close();
    }
  });
});
