import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { describe, expect, it } from "vitest";
import { benchKey } from "../../bench/harness/keys.js";
import { fillStore } from "../../bench/probes/recovery.js";
import { MetadataService } from "../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { LmdbStore } from "../../src/store/lmdb-store.js";
import { startChildServer } from "../support/child-server.js";
import { tempDir } from "../support/temp-dir.js";

/** KEYS is how many keys the store holds: enough that loading takes a good part of a second here. */
const KEYS = 200_000;

const loggedBefore = (lines: string[], msg: string) => lines.some((line) => (JSON.parse(line) as { msg?: string }).msg === msg);

describe("a server listens before it loads its store", () => {
  it("calls sent while it loads wait, and are answered in order with the loaded state", async () => {
    const dir = tempDir();
    await fillStore(dir, KEYS, 2);
    const server = await startChildServer(["--data-dir", dir]);
    const client = createClient(MetadataService, createGrpcTransport({ baseUrl: server.url }));
    const sentWhileLoading = !loggedBefore(server.lines, "ready");
    const order: number[] = [];
    const calls = [0, 1, 2, 3].map((i) =>
      client.batchExists({ namespace: "kv", keys: [benchKey(KEYS - 1 - i), `absent-${i}`] }).then((res) => {
        order.push(i);
        return res.exists;
      }),
    );
    const answers = await Promise.all(calls);
    expect(sentWhileLoading).toBe(true);
    for (const exists of answers) expect(exists).toEqual([true, false]);
    expect(order).toEqual([0, 1, 2, 3]);
  });

  it("a SIGTERM while it loads: the calls that wait get UNAVAILABLE REASON_SHUTTING_DOWN, and it exits 0", async () => {
    const dir = tempDir();
    await fillStore(dir, KEYS, 2);
    const server = await startChildServer(["--data-dir", dir]);
    const client = createClient(MetadataService, createGrpcTransport({ baseUrl: server.url }));
    const held = client.batchExists({ namespace: "kv", keys: [benchKey(0)] }).then(
      () => "answered",
      (e: Error) => e.message,
    );
    await server.logged("loading the store");
    server.child.kill("SIGTERM");
    expect(await held).toMatch(/^\[unavailable\] the server is shutting down/);
    expect(await server.exited).toBe(0);
    expect(loggedBefore(server.lines, "ready")).toBe(false);
    expect(server.stderr).not.toContain("cannot load the store");
  });

  it("when the store cannot be loaded, calls that wait get UNAVAILABLE and the process exits 1", async () => {
    const dir = tempDir();
    await fillStore(dir, KEYS, 2);
    // A key of a namespace without ranks, stored after every other key: it opens, and loading fails at its end.
    const store = await LmdbStore.open(dir);
    await store.commit([{ kind: "key", namespace: "zz-no-ranks", key: "orphan", parent: "", complete: true, pages: [0, 1] }]);
    await store.close();
    const server = await startChildServer(["--data-dir", dir]);
    const client = createClient(MetadataService, createGrpcTransport({ baseUrl: server.url }));
    const sentWhileLoading = !loggedBefore(server.lines, "ready");
    const error = await client.batchExists({ namespace: "kv", keys: [benchKey(0)] }).then(
      () => "answered",
      (e: Error) => e.message,
    );
    expect(sentWhileLoading).toBe(true);
    expect(error).toMatch(/\[unavailable\] the server could not load its store: stored key "orphan" of unknown namespace/);
    expect(await server.exited).toBe(1);
    expect(server.stderr).toContain("cannot load the store");
  });
});
