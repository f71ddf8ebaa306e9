import type * as http2 from "node:http2";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { HELD_PING_MS, HeldCalls } from "../../../src/protocol/held-calls.js";
import { LEFT_PING_MS, pingWithin } from "../../../src/protocol/ping-within.js";

/** pingable is a session that counts the PINGs sent on it and answers them when told (answer). */
function pingable() {
  const answers: ((error: Error | null) => void)[] = [];
  let sent = 0;
  const session = {
    closed: false,
    destroyed: false,
    ping(answered: (error: Error | null) => void) {
      sent++;
      answers.push(answered);
      return true;
    },
  };
  return { session: session as unknown as http2.ClientHttp2Session, sent: () => sent, answer: () => answers.shift()?.(null) };
}

/** verdicts records what each check heard: undefined while it waits, "answered" or its error's message. */
function verdicts() {
  const heard: (string | undefined)[] = [];
  return {
    heard,
    check(session: http2.Http2Session, ms: number) {
      const i = heard.push(undefined) - 1;
      pingWithin(session, ms, (error) => (heard[i] = error?.message ?? "answered"));
    },
  };
}

beforeEach(() => vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "setImmediate", "performance"] }));
afterEach(() => vi.useRealTimers());

describe("pingWithin joins a PING on its way", () => {
  it("sends none of its own, and counts ms from that PING's sending: a connection silent that long is given up at once", async () => {
    const { session, sent } = pingable();
    const { heard, check } = verdicts();
    check(session, 10_000); // the PING on its way (a held call's)
    await vi.advanceTimersByTimeAsync(1_200);
    check(session, LEFT_PING_MS); // the check when its server left the lead
    expect(sent()).toBe(1);
    await vi.advanceTimersByTimeAsync(1); // its timer, then a turn for the I/O
    expect(heard).toEqual([undefined, `a PING not answered within ${LEFT_PING_MS} ms`]);
  });

  it("waits only what is left of ms, and hears that PING's answer; the next check, after it, sends a PING of its own", async () => {
    const { session, sent, answer } = pingable();
    const { heard, check } = verdicts();
    check(session, 10_000);
    await vi.advanceTimersByTimeAsync(400);
    check(session, LEFT_PING_MS);
    await vi.advanceTimersByTimeAsync(LEFT_PING_MS - 400 - 1);
    expect(heard).toEqual([undefined, undefined]);
    answer();
    expect(heard).toEqual(["answered", "answered"]);
    check(session, LEFT_PING_MS);
    expect(sent()).toBe(2);
  });
});

describe("HeldCalls", () => {
  it("PINGs a connection once its oldest call waited HELD_PING_MS, and not again while that PING is unanswered", async () => {
    const { session, sent, answer } = pingable();
    const held = new HeldCalls(session);
    const [first, second] = [{}, {}];
    held.add(first);
    await vi.advanceTimersByTimeAsync(HELD_PING_MS - 1);
    expect(sent()).toBe(0);
    await vi.advanceTimersByTimeAsync(1);
    expect(sent()).toBe(1);
    held.add(second);
    await vi.advanceTimersByTimeAsync(HELD_PING_MS * 3);
    expect(sent()).toBe(1); // joined: the first PING is still on its way
    answer();
    await vi.advanceTimersByTimeAsync(HELD_PING_MS);
    expect(sent()).toBe(2); // heard, and calls still wait: PINGed again
    held.done(first);
    held.done(second);
    answer();
    await vi.advanceTimersByTimeAsync(HELD_PING_MS * 4);
    expect(sent()).toBe(2); // none waits: no PING, no timer
    expect(vi.getTimerCount()).toBe(0);
  });

  it("does not PING for calls each answered within HELD_PING_MS, however many come back to back", async () => {
    const { session, sent } = pingable();
    const held = new HeldCalls(session);
    let last: object | undefined;
    for (let i = 0; i < 20; i++) {
      const call = {};
      held.add(call);
      if (last !== undefined) held.done(last);
      last = call;
      await vi.advanceTimersByTimeAsync(HELD_PING_MS / 2);
    }
    expect(sent()).toBe(0);
  });
});
