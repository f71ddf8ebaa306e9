import type { Etcd3 } from "etcd3";
import { describe, expect, it } from "vitest";
import { ClusterKeys } from "../../../src/replication/cluster-keys.js";
import type { LocalCopy } from "../../../src/replication/local-copy.js";
import { LogReader } from "../../../src/replication/log-reader.js";
import type { Watches } from "../../../src/replication/watch.js";

describe("LogReader.follow", () => {
  it("rejects, and leaves no unhandled rejection, when the watch ends before it has opened", async () => {
    const unavailable = new Error("14 UNAVAILABLE: No connection established");
    // As the etcd3 package does when its watch stream fails: the watch's end is heard while open() is still under way.
    const watches = {
      async open(_build: unknown, events: { ended: (error: Error) => void }) {
        events.ended(unavailable);
        await new Promise((resolve) => setTimeout(resolve, 10));
        return async () => undefined;
      },
    } as unknown as Watches;
    const local = { storedSeq: 0, flush: async () => undefined } as unknown as LocalCopy;
    const reader = new LogReader({} as Etcd3, watches, new ClusterKeys("test"), local, () => undefined);
    const unhandled: unknown[] = [];
    const hear = (reason: unknown) => unhandled.push(reason);
    process.on("unhandledRejection", hear);
    try {
      await expect(reader.follow("1", new Promise(() => undefined))).rejects.toBe(unavailable);
      await new Promise((resolve) => setImmediate(resolve));
      expect(unhandled).toEqual([]);
    } finally {
      process.off("unhandledRejection", hear);
    }
  });
});
