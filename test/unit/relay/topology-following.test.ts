import { createRouterTransport } from "@connectrpc/connect";
import { afterEach, describe, expect, it, vi } from "vitest";
import { ClusterService } from "../../../gen/hf3fs/metadata/v1/cluster_pb.js";
import type { LeanTransports } from "../../../src/client/lean-transports.js";
import { TopologyFollowing } from "../../../src/relay/topology-following.js";

/** cluster answers GetTopology with 2 shards whose members are `members()` at the time of each call, and counts the calls. */
function cluster(members: () => string[][]) {
  const asked: number[] = [];
  const transport = createRouterTransport(({ service }) =>
    service(ClusterService, {
      getTopology: () => {
        asked.push(Date.now());
        return { shardCount: 2, shards: members().map((urls, index) => ({ index, members: urls.map((url, i) => ({ id: url, url, leader: i === 0 })) })) };
      },
    }),
  );
  return { asked, transports: { of: () => transport } as unknown as LeanTransports };
}

/** turns lets the read's promises settle, the fake clock standing still. */
const turns = async () => {
  for (let i = 0; i < 20; i++) await Promise.resolve();
};

describe("TopologyFollowing (a relay's view of a cluster of shards)", () => {
  afterEach(() => vi.useRealTimers());

  it("asks again within a second while the answers change (a standby not yet named), and every 10 s once two agree", async () => {
    vi.useFakeTimers();
    let shards = [["http://a0"], ["http://b0", "http://b1"]];
    const { asked, transports } = cluster(() => shards);
    const followed: string[][][] = [];
    const following = new TopologyFollowing(
      () => ["http://a0"],
      transports,
      (s) => followed.push(s),
    );
    following.run();
    await vi.advanceTimersByTimeAsync(0);
    await turns();
    expect(asked).toHaveLength(1);
    // a1 is named now: the relay, which asks again within a second, knows it then, not 10 s later.
    shards = [
      ["http://a0", "http://a1"],
      ["http://b0", "http://b1"],
    ];
    await vi.advanceTimersByTimeAsync(1_000);
    expect(followed.at(-1)).toEqual(shards);
    await vi.advanceTimersByTimeAsync(1_000); // the same answer again: settled
    expect(asked).toHaveLength(3);
    await vi.advanceTimersByTimeAsync(9_000);
    expect(asked).toHaveLength(3);
    await vi.advanceTimersByTimeAsync(1_000);
    expect(asked).toHaveLength(4);
    following.stop();
  });
});
