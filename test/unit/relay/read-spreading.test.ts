import { createRouterTransport } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { MetadataService } from "../../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { LOG_POSITION, MIN_POSITION } from "../../../src/protocol/headers.js";
import { ReadSpreading } from "../../../src/relay/read-spreading.js";

/** standby answers BatchExists, as a caught-up standby would, and keeps the MIN_POSITION of each read it took. */
function standby() {
  const mins: (string | null)[] = [];
  const transport = createRouterTransport(({ service }) =>
    service(MetadataService, {
      batchExists: (request, context) => {
        mins.push(context.requestHeader.get(MIN_POSITION));
        return { exists: request.keys.map(() => true) };
      },
    }),
  );
  return { mins, transport };
}

describe("ReadSpreading (a relay's reads on a shard's caught-up standbys)", () => {
  const read = { keys: ["a"] };

  it("sends reads to the leader until an answer named the log's position, then to the standbys with the highest position heard", async () => {
    const { mins, transport } = standby();
    const reads = new ReadSpreading(
      () => transport,
      () => "http://leader",
    );
    reads.follow(["http://leader", "http://standby"]);
    // Just made (a relay started, or the upstreams of a topology's shards): the read goes to the leader.
    expect(await reads.read("batchExists", read, {})).toBeUndefined();
    // An answer without a position (a single node's) names none.
    reads.heard(new Headers());
    expect(await reads.read("batchExists", read, {})).toBeUndefined();
    reads.heard(new Headers({ [LOG_POSITION]: "0" }));
    expect(await reads.read("batchExists", read, {})).toMatchObject({ response: { exists: [true] } });
    reads.heard(new Headers({ [LOG_POSITION]: "42" }));
    reads.heard(new Headers({ [LOG_POSITION]: "17" }));
    await reads.read("batchExists", read, {});
    expect(mins).toEqual(["0", "42"]);
  });

  it("leaves writes to the leader, and reads too while no standby is caught up", async () => {
    const { mins, transport } = standby();
    const reads = new ReadSpreading(
      () => transport,
      () => "http://leader",
    );
    reads.heard(new Headers({ [LOG_POSITION]: "5" }));
    reads.follow(["http://leader"]);
    expect(await reads.read("batchExists", read, {})).toBeUndefined();
    reads.follow(["http://leader", "http://standby"]);
    expect(await reads.read("batchAllocate", { rank: 0, keys: ["a"] }, {})).toBeUndefined();
    expect(mins).toEqual([]);
  });
});
