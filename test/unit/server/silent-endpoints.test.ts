import { describe, expect, it } from "vitest";
import { SILENT_MS, SilentEndpoints } from "../../../src/server/silent-endpoints.js";

/** endpointsAt is three endpoints on a clock the test moves, with a random source that walks 0, 1/3, 2/3, 0... so that every open endpoint comes up in turn. */
function endpointsAt() {
  const clock = { now: 1_000 };
  let n = 0;
  const endpoints = new SilentEndpoints(
    3,
    () => clock.now,
    () => (n++ % 3) / 3 + 0.01,
  );
  const picks = (count: number) => new Set(Array.from({ length: count }, () => endpoints.pick()));
  return { clock, endpoints, picks };
}

describe("the lean etcd client's choice of endpoint", () => {
  it("avoids an endpoint for SILENT_MS after a call to it ran out, and not a moment longer", () => {
    const { clock, endpoints, picks } = endpointsAt();
    expect(picks(9)).toEqual(new Set([0, 1, 2]));
    endpoints.ranOut(1, clock.now - 300);
    expect(picks(9)).toEqual(new Set([0, 2]));
    clock.now += SILENT_MS - 1;
    expect(picks(9)).toEqual(new Set([0, 2]));
    clock.now += 1;
    expect(picks(9)).toEqual(new Set([0, 1, 2]));
  });

  it("takes an endpoint back once it answers a call sent after the one that ran out", () => {
    const { clock, endpoints, picks } = endpointsAt();
    endpoints.ranOut(0, clock.now - 300);
    endpoints.answered(0, clock.now - 400); // sent before the silence was seen: no news
    expect(endpoints.silent(0)).toBe(true);
    endpoints.answered(0, clock.now - 200);
    expect(endpoints.silent(0)).toBe(false);
    expect(picks(9)).toEqual(new Set([0, 1, 2]));
  });

  it("does not avoid an endpoint for a call that ran out but was sent before a call it answered (etcd electing a leader)", () => {
    const { clock, endpoints } = endpointsAt();
    // A follower held a call sent while etcd had no leader, and answered one sent after the election before the first ran out.
    endpoints.answered(2, clock.now - 100);
    endpoints.ranOut(2, clock.now - 600);
    expect(endpoints.silent(2)).toBe(false);
    // The paused leader, silent on a call sent after the follower's answer, is still avoided.
    endpoints.ranOut(0, clock.now - 50);
    expect(endpoints.silent(0)).toBe(true);
  });

  it("avoids every silent endpoint, not only a minority, and picks among all once every one is silent", () => {
    const { clock, endpoints, picks } = endpointsAt();
    endpoints.ranOut(0, clock.now - 300);
    endpoints.ranOut(1, clock.now - 300);
    expect(picks(9)).toEqual(new Set([2]));
    endpoints.ranOut(2, clock.now - 300);
    expect(picks(9)).toEqual(new Set([0, 1, 2]));
  });
});
