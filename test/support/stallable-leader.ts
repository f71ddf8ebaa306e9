import { Leadership } from "../../src/service/leadership.js";
import { type StallingProxy, stallingProxy } from "./stalling-proxy.js";
import { startTestServer, type TestServer } from "./test-server.js";

/** StallableLeader is two in-process members: `leader` leads behind `proxy`, which can stall it; `standby` names it and refuses calls. */
export interface StallableLeader {
  readonly leader: TestServer;
  readonly standby: TestServer;
  /** proxy is the way to the leader: its URL is the leader's as the others know it. */
  readonly proxy: StallingProxy;
  /** takeOver makes the standby lead, as when the stalled leader's lease lapsed; the leader still believes it leads. */
  takeOver(): void;
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
  return { leader, standby, proxy, takeOver: () => second.lead(() => true) };
}
