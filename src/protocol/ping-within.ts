import type * as http2 from "node:http2";

/** SILENT_MEANS says what a server found silent is, wherever it is shown (a relay's status, its page). */
export const SILENT_MEANS = "a PING unanswered: paused, stalled or cut off";

/** Unanswered is a session's PING on its way: when it was sent, and who waits for its answer. */
interface Unanswered {
  readonly sentAt: number;
  readonly waiting: ((error?: Error) => void)[];
}

/** unanswered holds each session's PING on its way, if one is: another check joins it instead of sending its own. */
const unanswered = new WeakMap<http2.Http2Session, Unanswered>();

/**
 * pingWithin PINGs an HTTP/2 session and calls `heard` once: with no
 * error when the answer came within ms, with one when it did not, or the
 * PING could not be sent or failed. A PING already on its way is joined,
 * and ms counted from its sending: a connection already silent that long
 * (a call held on it was PINGed, HeldCalls) is given up at once. The
 * verdict waits one turn of the event loop past the timer, for its I/O: a
 * process that was itself stalled (a long task, a pause) finds the timer
 * due and the answer already readable, and Node runs due timers before it
 * reads; without the turn, it would close a live connection for its own
 * stall.
 */
export function pingWithin(session: http2.Http2Session, ms: number, heard: (error?: Error) => void): void {
  let settled = false;
  const settle = (error?: Error) => {
    if (settled) return;
    settled = true;
    clearTimeout(deadline);
    heard(error);
  };
  const joined = unanswered.get(session);
  const left = joined === undefined ? ms : Math.max(0, joined.sentAt + ms - performance.now());
  const deadline = setTimeout(() => setImmediate(() => settle(new Error(`a PING not answered within ${ms} ms`))), left);
  deadline.unref();
  if (joined !== undefined) {
    joined.waiting.push(settle);
    return;
  }
  const ping: Unanswered = { sentAt: performance.now(), waiting: [settle] };
  const sent = session.ping((error) => {
    if (unanswered.get(session) === ping) unanswered.delete(session);
    for (const answered of ping.waiting) answered(error ?? undefined);
  });
  // Not sent: too many unanswered, or the connection is still being made (Node queues the PING and answers undefined).
  if (!sent) settle(new Error("a PING could not be sent (too many unanswered, or the connection not made yet)"));
  else unanswered.set(session, ping);
}

/**
 * LEFT_PING_MS is how long a server that calls just left for a new leader
 * (a health watch or etcd named one) has to answer a PING before its
 * connection is destroyed: a leader paused or cut off through its failover
 * would hold the calls on it until its connection's own PINGs time out,
 * while a live one (a standby now, passing calls on) answers at once.
 */
export const LEFT_PING_MS = 1_000;

/**
 * destroyIfSilent PINGs a session and destroys it (failing its streams)
 * when the answer does not come within ms, or at once when the connection
 * is not made yet: a server that left the lead is not waited for.
 */
export function destroyIfSilent(session: http2.Http2Session, ms: number): void {
  if (session.closed || session.destroyed) return;
  pingWithin(session, ms, (error) => {
    if (error) session.destroy(error);
  });
}
