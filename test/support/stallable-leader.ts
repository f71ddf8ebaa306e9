import { Leadership } from "../../src/service/leadership.js";
import { type StallingProxy, stallingProxy } from "./stalling-proxy.js";
import { startTestServer, type TestServer } from "./test-server.js";
import { until } from "./until.js";

/** StallableLeader is two in-process members: `leader` leads behind `proxy`, which can stall it; `standby` names it and refuses calls. */
export interface StallableLeader {
  readonly leader: TestServer;
  readonly standby: TestServer;
  /** proxy is the way to the leader: its URL is the leader's as the others know it. */
  readonly proxy: StallingProxy;
  /**
   * heldThroughTakeOver stalls the leader, makes `call`, and once the proxy
   * holds it (it reached the leader) runs `before`, makes the standby lead,
   * as when the stalled leader's lease lapsed (the leader still believes it
   * leads), and runs `told` (whatever else learns of it); it resolves with
   * the call's answer and the ms from the take-over to it, the leader
   * resumed.
   */
  heldThroughTakeOver<T>(call: () => Promise<T>, steps?: TakeOverSteps): Promise<{ answer: T; ms: number }>;
}

/** TakeOverSteps are what a test does around the take-over of a held call. */
export interface TakeOverSteps {
  /** before runs once the call is held, before the standby leads (a wait for what a stalled leader's failover takes). */
  readonly before?: () => unknown;
  /** told runs once the standby leads: whatever else learns of it. */
  readonly told?: () => unknown;
}

/**
 * stallableLeader starts the two. The leader PINGs its own connections
 * every 10 minutes, so that its PINGs, unanswered through a stall, do not
 * end a call held there: only what the test is about may.
 */
export async function stallableLeader(): Promise<StallableLeader> {
  const [first, second] = [new Leadership(), new Leadership()];
  const leader = await startTestServer({}, undefined, 0, { leadership: first, standbyCalls: "refuse", http2KeepaliveMs: 600_000 });
  const standby = await startTestServer({}, undefined, 0, { leadership: second, standbyCalls: "refuse" });
  const proxy = await stallingProxy(leader.url);
  first.lead(() => true);
  second.follow(proxy.url, true);
  return {
    leader,
    standby,
    proxy,
    async heldThroughTakeOver(call, steps = {}) {
      proxy.stall(); // the leader stops answering: paused, or cut off
      try {
        const held = call();
        await until(() => proxy.callsHeld() > 0);
        await steps.before?.();
        second.lead(() => true);
        await steps.told?.();
        const from = performance.now();
        const answer = await held;
        return { answer, ms: Math.round(performance.now() - from) };
      } finally {
        proxy.resume();
      }
    },
  };
}
