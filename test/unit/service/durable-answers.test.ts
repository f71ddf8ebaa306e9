import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { describe, expect, it } from "vitest";
import { ErrorInfoSchema, MetadataService, Reason } from "../../../gen/hf3fs/metadata/v1/metadata_pb.js";
import type { Change } from "../../../src/core/change.js";
import { MetadataError } from "../../../src/core/errors.js";
import { MemoryStore } from "../../../src/store/memory-store.js";
import type { Store } from "../../../src/store/store.js";
import { startTestServer } from "../../support/test-server.js";

/** GatedStore holds every commit made while its gate is shut until it opens (or fails them all), as a slow disk or an etcd append would. */
class GatedStore implements Store {
  readonly inner = new MemoryStore();
  /** commits counts the commits asked for so far. */
  commits = 0;
  private gate: Promise<void> = Promise.resolve();
  private release: (failure?: Error) => void = () => {};
  private readonly waiters: (() => void)[] = [];

  get serverId(): string {
    return this.inner.serverId;
  }

  get failed(): Promise<Error> {
    return this.inner.failed;
  }

  shut(): void {
    this.gate = new Promise<void>((resolve, reject) => (this.release = (failure) => (failure === undefined ? resolve() : reject(failure))));
    this.gate.catch(() => undefined);
  }

  open(failure?: Error): void {
    this.release(failure);
  }

  /** commitAsked resolves once `n` commits in all were asked for. */
  async commitAsked(n: number): Promise<void> {
    while (this.commits < n) await new Promise<void>((resolve) => this.waiters.push(resolve));
  }

  commit(changes: readonly Change[]): Promise<void> {
    this.commits++;
    for (const waiter of this.waiters.splice(0)) waiter();
    const done = this.inner.commit(changes);
    return this.gate.then(() => done);
  }

  close(): Promise<void> {
    return this.inner.close();
  }
}

/** outcome is a call's error code and reason, "ok" when it succeeded. */
const outcome = (call: Promise<unknown>) =>
  call.then(
    () => "ok",
    (e: unknown) => {
      const error = ConnectError.from(e);
      return `${Code[error.code]} ${Reason[error.findDetails(ErrorInfoSchema)[0]?.reason ?? Reason.UNSPECIFIED]}`;
    },
  );

describe("an error answer that rests on another call's change", () => {
  it.each([
    ["durable", undefined, "FailedPrecondition RANK_NOT_INITIALIZED"],
    ["that never became durable", new MetadataError(Reason.STORE_UNAVAILABLE, "simulated I/O error"), "Unavailable STORE_UNAVAILABLE"],
  ])("is sent only once that change is %s", async (_, failure, answer) => {
    const store = new GatedStore();
    const server = await startTestServer({}, store);
    // A plain client: the project's own would initialize the rank again and retry.
    const client = createClient(MetadataService, createGrpcTransport({ baseUrl: server.url }));
    await client.initializeRank({ rank: 0, numPages: 8, worldSize: 1 });
    store.shut();
    const before = store.commits;
    const drop = outcome(client.dropRank({ rank: 0 })); // applied in memory, its commit held at the gate
    await store.commitAsked(before + 1);
    let answered = false;
    const allocate = outcome(client.batchAllocate({ rank: 0, keys: ["k"] })).then((result) => {
      answered = true;
      return result;
    });
    // The allocation fails on the dropped rank; its answer must wait for the drop's commit, which it asks for too.
    await Promise.race([allocate, store.commitAsked(before + 2)]);
    expect(answered).toBe(false);
    store.open(failure);
    expect(await allocate).toBe(answer);
    expect(await drop).toBe(failure === undefined ? "ok" : answer);
  });
});
