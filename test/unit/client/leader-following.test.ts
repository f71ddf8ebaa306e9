import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, createRouterTransport } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { ErrorInfoSchema, MetadataService, Reason } from "../../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { LeaderFollowing } from "../../../src/client/leader-following.js";

const POLICY = { deadlineMs: 10_000, initialBackoffMs: 1, maxBackoffMs: 1 };

/**
 * members are three fake members: "a" holds every BatchExists until told
 * to fail it (a paused leader, whose calls fail once its PINGs time out),
 * "b" answers NOT_LEADER naming "c", and "c" answers. `sent` lists where
 * each attempt went.
 */
function members() {
  const sent: string[] = [];
  const failA: (() => void)[] = [];
  const transportFor = (url: string) =>
    createRouterTransport(({ service }) =>
      service(MetadataService, {
        batchExists: async ({ keys }, ctx) => {
          sent.push(url);
          if (url === "http://a") {
            await new Promise<void>((resolve) => {
              failA.push(resolve);
              ctx.signal.addEventListener("abort", () => resolve());
            });
            throw new ConnectError("the connection to a paused server was closed (its PING unanswered)", Code.Unavailable);
          }
          if (url === "http://b") {
            const notLeader = new ConnectError("not the leader", Code.Unavailable);
            notLeader.details.push({ desc: ErrorInfoSchema, value: create(ErrorInfoSchema, { reason: Reason.NOT_LEADER, leaderUrl: "http://c" }) });
            throw notLeader;
          }
          return { exists: keys.map(() => true) };
        },
      }),
    );
  return { sent, failA, transportFor };
}

/** until waits until `check` holds, a turn at a time. */
async function until(check: () => boolean): Promise<void> {
  while (!check()) await new Promise((resolve) => setImmediate(resolve));
}

describe("LeaderFollowing", () => {
  it("sends a call failed by a server calls no longer go to where they go now, not to the list's next (which may be that server), and tells of each move once", async () => {
    const { sent, failA, transportFor } = members();
    const moves: string[] = [];
    const onServer = (url: string) => moves.push(url);
    const following = new LeaderFollowing({
      baseUrl: "http://a,http://b,http://c",
      listedOnly: true,
      transportFor,
      policy: POLICY,
      random: () => 0.5,
      onServer,
    });
    const waiting = following.call("batchExists", { keys: ["k"] }, undefined);
    await until(() => failA.length === 1);
    // Another call finds "a" gone, then "b" names "c" the leader: calls go to "c" from then on.
    const other = following.call("batchExists", { keys: ["j"] }, undefined);
    await until(() => failA.length === 2);
    failA[1]!();
    expect((await other).response).toMatchObject({ exists: [true] });
    expect([following.current, moves]).toEqual(["http://c", ["http://b", "http://c"]]); // after "a" failed, and to the leader "b" named
    failA[0]!();
    expect((await waiting).response).toMatchObject({ exists: [true] });
    expect(sent).toEqual(["http://a", "http://a", "http://b", "http://c", "http://c"]);
    expect(moves).toEqual(["http://b", "http://c"]); // no move: the first call failed where calls no longer went
  });

  it("goes on to the list's next server when the one that failed is still where calls go", async () => {
    const { sent, failA, transportFor } = members();
    const following = new LeaderFollowing({ baseUrl: "http://a,http://c", transportFor, policy: POLICY, random: () => 0.5 });
    const call = following.call("batchExists", { keys: ["k"] }, undefined);
    await until(() => failA.length === 1);
    failA[0]!();
    expect((await call).attempts).toBe(2);
    expect(sent).toEqual(["http://a", "http://c"]);
  });

  it("does not send again a call its caller canceled", async () => {
    const { failA, transportFor } = members();
    const following = new LeaderFollowing({ baseUrl: "http://a,http://c", transportFor, policy: POLICY, random: () => 0.5 });
    const abort = new AbortController();
    const call = following.call("batchExists", { keys: ["k"] }, { signal: abort.signal });
    await until(() => failA.length === 1);
    abort.abort();
    await expect(call).rejects.toMatchObject({ code: Code.Canceled });
  });

  it("tells of the server calls left when told of a leader elsewhere, and only then: the calls held there wait on its connection's check", async () => {
    const { failA, transportFor } = members();
    const left: string[] = [];
    const following = new LeaderFollowing({ baseUrl: "http://a,http://c", transportFor, policy: POLICY, random: () => 0.5, left: (url) => left.push(url) });
    const held = following.call("batchExists", { keys: ["k"] }, undefined);
    await until(() => failA.length === 1);
    following.prefer("http://a"); // where calls go already
    expect(left).toEqual([]);
    following.prefer("http://c");
    following.prefer("http://c");
    expect([left, following.current]).toEqual([["http://a"], "http://c"]);
    failA[0]!(); // the check found "a" silent and closed its connection: the held call goes to "c"
    expect((await held).attempts).toBe(2);
  });
});
