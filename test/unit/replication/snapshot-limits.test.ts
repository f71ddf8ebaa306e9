import { once } from "node:events";
import { createServer } from "node:http2";
import type { AddressInfo } from "node:net";
import { Code, ConnectError, createClient, createRouterTransport } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { describe, expect, it } from "vitest";
import { ReplicationService } from "../../../gen/hf3fs/metadata/internal/v1/replication_pb.js";
import type { Change } from "../../../src/core/change.js";
import { encodeGroup } from "../../../src/replication/log-codec.js";
import { fetchSnapshot, type ReplicationSource, replicationService } from "../../../src/replication/replication-service.js";
import type { LmdbStore } from "../../../src/store/lmdb-store.js";

/** source is a member (caught up unless told) whose store holds `records` records; `reads` counts the records read, `done` resolves when the read transaction ends. */
function source(records: number, caughtUp = true) {
  let ended!: () => void;
  const done = new Promise<void>((resolve) => (ended = resolve));
  const state = { reads: 0, open: true };
  function* stored(): Generator<Change> {
    for (let i = 0; i < records; i++) {
      if (!state.open) throw new Error("read after the transaction ended");
      state.reads++;
      yield { kind: "forget", namespace: "kv", key: `k${i}` };
    }
  }
  const local = {
    snapshot: () => ({
      appliedSeq: 7,
      total: records,
      records: stored(),
      done: () => {
        state.open = false;
        ended();
      },
    }),
  } as unknown as LmdbStore;
  const leader: ReplicationSource = {
    clusterId: "c",
    clusterName: "n",
    memberId: "m",
    caughtUp: () => caughtUp,
    local,
    members: async () => [],
    knownMembers: async () => [],
    forget: async () => "unknown",
  };
  return { leader, done, state };
}

describe("a Snapshot stream", () => {
  it("ends its read transaction when its reader stops reading, and reads nothing after", async () => {
    const { leader, done, state } = source(100_000);
    const transport = createRouterTransport(({ service }) => service(ReplicationService, replicationService(leader, { stallMs: 50, deadlineMs: 60_000 })));
    const stream = createClient(ReplicationService, transport).snapshot({ clusterId: "c" })[Symbol.asyncIterator]();
    expect((await stream.next()).done).toBe(false); // one piece taken, then the reader stalls
    await done;
    const reads = state.reads;
    expect(reads).toBeLessThan(100_000);
    await expect(stream.next().then(() => stream.next())).rejects.toThrow(/took no piece for 50 ms/);
    expect(state.reads).toBeLessThanOrEqual(reads + 20_000); // at most the piece under way
  });

  it("ends it when its reader goes away", async () => {
    const { leader, done } = source(100_000);
    const transport = createRouterTransport(({ service }) => service(ReplicationService, replicationService(leader, { stallMs: 60_000, deadlineMs: 60_000 })));
    const abort = new AbortController();
    const stream = createClient(ReplicationService, transport).snapshot({ clusterId: "c" }, { signal: abort.signal })[Symbol.asyncIterator]();
    await stream.next();
    abort.abort();
    await done;
  });

  it("ends it past its deadline, however steadily read", async () => {
    const { leader, done } = source(Number.MAX_SAFE_INTEGER);
    const transport = createRouterTransport(({ service }) => service(ReplicationService, replicationService(leader, { stallMs: 60_000, deadlineMs: 100 })));
    const read = (async () => {
      // A reader over a network gives the event loop a turn between pieces; the in-memory transport would not.
      for await (const _ of createClient(ReplicationService, transport).snapshot({ clusterId: "c" })) await new Promise(setImmediate);
    })();
    await expect(read).rejects.toThrow(/took more than 100 ms/);
    await done;
  });

  it("streams a whole store to a reader that reads it", async () => {
    const { leader, state } = source(45_000);
    const transport = createRouterTransport(({ service }) => service(ReplicationService, replicationService(leader)));
    let records = 0;
    for await (const piece of createClient(ReplicationService, transport).snapshot({ clusterId: "c" })) {
      expect(piece.appliedSeq).toBe(7n);
      expect(piece.totalRecords).toBe(45_000n); // every piece says how many in all, for the receiver's progress
      records += piece.records.length > 0 ? 1 : 0;
    }
    expect([state.reads, state.open, records]).toEqual([45_000, false, 3]);
  });

  it("is refused by a member that is not caught up, before it reads its store", async () => {
    const { leader, state } = source(10, false);
    const transport = createRouterTransport(({ service }) => service(ReplicationService, replicationService(leader)));
    const read = (async () => {
      for await (const _ of createClient(ReplicationService, transport).snapshot({ clusterId: "c" }));
    })();
    await expect(read).rejects.toMatchObject({ code: Code.FailedPrecondition, rawMessage: expect.stringMatching(/not caught up/) });
    expect(state.reads).toBe(0);
  });

  it("is given up by its reader once the member sends no piece for a while, so it can ask another", async () => {
    let served = 0;
    const server = createServer(
      connectNodeAdapter({
        routes: (router) =>
          router.service(ReplicationService, {
            async *snapshot(_req, ctx) {
              served++;
              yield { appliedSeq: 3n, records: encodeGroup([{ kind: "forget", namespace: "kv", key: "k" }]), totalRecords: 2n };
              // A member paused (SIGSTOP) after its first piece: nothing more comes, the connection stays open.
              await new Promise((_, reject) => ctx.signal.addEventListener("abort", () => reject(new ConnectError("gone", Code.Canceled))));
            },
          }),
      }),
    );
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const pieces: number[] = [];
    const read = (async () => {
      for await (const piece of fetchSnapshot(url, "c", undefined, undefined, new AbortController().signal, 200)) pieces.push(piece.records.length);
    })();
    await expect(read).rejects.toThrow(`${url} sent no piece of its snapshot for 200 ms`);
    expect([served, pieces]).toEqual([1, [1]]);
    server.close();
  });
});
