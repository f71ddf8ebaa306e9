import { describe, expect, it } from "vitest";
import { Reason } from "../../../src/core/errors.js";
import { Leadership } from "../../../src/service/leadership.js";

describe("Leadership", () => {
  it("refuses calls until the member leads, naming the leader it knows", () => {
    const leadership = new Leadership();
    expect(leadership.refusal?.reason).toBe(Reason.NOT_LEADER);
    expect(leadership.refusal?.subject.leaderUrl).toBe("");
    leadership.follow("http://10.0.0.2:18000", true);
    expect(leadership.refusal?.subject.leaderUrl).toBe("http://10.0.0.2:18000");
    expect(leadership.caughtUp).toBe(true);
  });

  it("reads the lease at every call: a leader whose lease lapsed refuses before anything tells it", () => {
    const leadership = new Leadership();
    let valid = true;
    leadership.lead(() => valid);
    expect(leadership.refusal).toBeUndefined();
    valid = false; // as after a SIGSTOP past the lease: no timer of the member has run yet
    expect(leadership.refusal?.reason).toBe(Reason.NOT_LEADER);
    valid = true;
    expect(leadership.refusal).toBeUndefined();
  });

  it("wakes a waiter at each change", async () => {
    const leadership = new Leadership();
    const changed = leadership.next(new AbortController().signal);
    leadership.lead(() => true);
    await changed;
    const aborted = new AbortController();
    const waiting = leadership.next(aborted.signal);
    aborted.abort();
    await waiting;
  });

  it("answers lookups as misses once it has known no leader for --read-hold, and not while it leads or names one", () => {
    let now = 0;
    const leadership = new Leadership(1_000, () => now);
    expect(leadership.lookupsMissedInMs()).toBe(1_000); // a member starts knowing no leader
    leadership.follow("http://10.0.0.2:18000", true);
    now = 5_000;
    expect(leadership.lookupsMissedInMs()).toBe(Number.POSITIVE_INFINITY);
    leadership.follow("", false); // etcd out of reach: the leader it named is gone
    now = 5_400;
    expect(leadership.lookupsMissedInMs()).toBe(600);
    leadership.follow("", true); // still none: the outage counts from when it began
    now = 6_000;
    expect(leadership.lookupsMissedInMs()).toBe(0);
    leadership.lead(() => true);
    expect(leadership.lookupsMissedInMs()).toBe(Number.POSITIVE_INFINITY);
    leadership.follow("", false); // its term ended: a new outage begins
    expect(leadership.lookupsMissedInMs()).toBe(1_000);
  });

  it("never answers lookups as misses with --read-hold 0", () => {
    let now = 0;
    const leadership = new Leadership(0, () => now);
    now = 60_000;
    expect(leadership.lookupsMissedInMs()).toBe(Number.POSITIVE_INFINITY);
  });
});
