import { describe, expect, it } from "vitest";
import { assertInvariants } from "../../bench/harness/invariants.js";
import { AllocationStatus } from "../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { createMetadataClient, type MetadataClient } from "../../src/client/index.js";
import { MetadataState } from "../../src/core/state.js";
import { LmdbStore } from "../../src/store/lmdb-store.js";
import { startChildServer } from "../support/child-server.js";
import { tempDir } from "../support/temp-dir.js";

const WORKERS = 4;
const BATCH = 32;

/** Acked is what the server acknowledged to one worker before the crash. */
interface Acked {
  reserved: Map<string, number>;
  confirmed: Map<string, number>;
}

async function workerLoop(client: MetadataClient, namespace: string, acked: Acked, running: () => boolean) {
  for (let round = 0; running(); round++) {
    const keys = Array.from({ length: BATCH }, (_, i) => `${namespace}-${Date.now()}-${round}-${i}`);
    const { pages } = await client.batchAllocate({ namespace, rank: 0, keys });
    for (const [i, k] of keys.entries()) acked.reserved.set(k, pages[i]!);
    // Confirm all but the last key, so some reservations stay open.
    const confirmed = keys.slice(0, -1);
    await client.confirmWrite({ namespace, rank: 0, keys: confirmed, pages: pages.slice(0, -1) });
    for (const [i, k] of confirmed.entries()) acked.confirmed.set(k, pages[i]!);
  }
}

describe("a durable server killed with SIGKILL under load", () => {
  it("keeps every acknowledged confirmation and reservation, over several crashes", async () => {
    const dir = tempDir();
    const args = ["--data-dir", dir, "--reservation-ttl", "10m"];
    const acked: Acked[] = Array.from({ length: WORKERS }, () => ({ reserved: new Map(), confirmed: new Map() }));
    for (let crash = 0; crash < 5; crash++) {
      const server = await startChildServer(args);
      const clients = acked.map(() => createMetadataClient({ baseUrl: server.url, retry: { deadlineMs: 0 } }));
      await Promise.all(clients.map((c, w) => c.initializeRank({ namespace: `w${w}`, rank: 0, numPages: 100_000, worldSize: 1 })));
      let alive = true;
      const loops = clients.map((c, w) => workerLoop(c, `w${w}`, acked[w]!, () => alive).catch(() => undefined));
      await new Promise((resolve) => setTimeout(resolve, 150 + Math.random() * 600));
      server.child.kill("SIGKILL");
      alive = false;
      await Promise.all(loops);
      await server.exited;
    }
    expect(acked.every((a) => a.confirmed.size > 0)).toBe(true);

    const server = await startChildServer(args);
    const client = createMetadataClient({ baseUrl: server.url, retry: { deadlineMs: 0 } });
    for (const [w, { confirmed, reserved }] of acked.entries()) {
      const namespace = `w${w}`;
      const confirmedKeys = [...confirmed.keys()];
      const { pages } = await client.getLocations({ namespace, rank: 0, keys: confirmedKeys });
      expect(pages).toEqual(confirmedKeys.map((k) => confirmed.get(k)));
      const open = [...reserved.keys()].filter((k) => !confirmed.has(k));
      const again = await client.batchAllocate({ namespace, rank: 0, keys: open });
      expect(again.pages).toEqual(open.map((k) => reserved.get(k)));
      for (const status of again.statuses) expect([AllocationStatus.RESERVED, AllocationStatus.EXISTING]).toContain(status);
    }
    server.child.kill("SIGTERM");
    expect(await server.exited).toBe(0);

    const store = await LmdbStore.open(dir);
    const state = new MetadataState(Date.now, {});
    state.restore(store.stored());
    assertInvariants(state);
    await store.close();
  });
});
