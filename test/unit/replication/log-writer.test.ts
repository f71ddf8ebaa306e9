import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { Change } from "../../../src/core/index.js";
import { ClusterKeys } from "../../../src/replication/cluster-keys.js";
import type { LocalCopy } from "../../../src/replication/local-copy.js";
import type { LogAppend } from "../../../src/replication/log-append.js";
import { LogWriter } from "../../../src/replication/log-writer.js";
import { heldSession } from "../../support/held-session.js";

/** etcdAnsweringAfter is an etcd whose appends succeed after `ms` each. */
function etcdAnsweringAfter(ms: number): LogAppend {
  return () => new Promise((resolve) => setTimeout(() => resolve({ succeeded: true, leaderRevision: undefined, entryExists: false }), ms));
}

const session = heldSession();
const local = { write: () => undefined } as unknown as LocalCopy;
const change: Change = { kind: "unreserve", namespace: "kv", rank: 0, page: 3 };

describe("a leader's appends (LogWriter)", () => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "performance"] });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it.each([
    [400, 0],
    [1_500, 1],
  ])("an append that takes %i ms is logged %i times, with how long it took", async (ms, logged) => {
    const warn = vi.fn();
    const writer = new LogWriter(etcdAnsweringAfter(ms), new ClusterKeys("test"), session, "1", 1, local, { warn });
    const committed = writer.commit([change]);
    await vi.advanceTimersByTimeAsync(ms);
    await committed;
    expect(warn).toHaveBeenCalledTimes(logged);
    if (logged > 0) expect(warn).toHaveBeenCalledWith({ tookMs: ms, calls: 1, lastSeq: 1 }, "cluster: a slow append to the log");
  });
});
