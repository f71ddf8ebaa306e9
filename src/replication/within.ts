import type { CallOptions } from "@grpc/grpc-js";
import { isBrokenCircuitError } from "cockatiel";
import { GRPCDeadlineExceededError, isRecoverableError } from "etcd3";

/**
 * ATTEMPT_MS bounds one attempt of a member's etcd call on the write path:
 * an endpoint that stopped answering (paused, partitioned) holds the call
 * this long at most; then it goes again, to an endpoint the client picks
 * anew. Well above an etcd round trip under load, well below a lease.
 */
export const ATTEMPT_MS = 600;

/** PAUSE_MS separates attempts that failed at once (a refused connection), so that they do not spin. */
const PAUSE_MS = 25;

/** within is the options of an etcd call that must be answered within ms (at least 1 ms). */
export function within(ms: number): CallOptions {
  return { deadline: new Date(Date.now() + Math.max(ms, 1)) };
}

/**
 * attempts makes an etcd call within a budget in attempts of attemptMs
 * (ATTEMPT_MS unless a call's answer may take longer) at most each, again
 * after each failure that may be the endpoint's (etcd3's recoverable
 * errors: unavailable, deadline exceeded and the like; or every endpoint
 * avoided for a moment), so that one endpoint that stops answering costs a
 * call about ATTEMPT_MS, not its whole budget. The budget is budgetMs from
 * the start, or what a function says is left at each attempt (a lease's
 * remaining validity, which keepalives answered meanwhile extend). Every
 * call made so is safe to repeat (reads, lease keepalives, and writes
 * guarded by a compare that a repeat fails). A call that ends failed throws
 * the last failure that said why (a refused connection, no leader), or,
 * when every attempt went unanswered, an error that says so.
 */
export async function attempts<T>(budgetMs: number | (() => number), call: (options: CallOptions) => Promise<T>, attemptMs = ATTEMPT_MS): Promise<T> {
  const started = performance.now();
  const left = typeof budgetMs === "number" ? () => started + budgetMs - performance.now() : budgetMs;
  let said: Error | undefined; // the last failure that said more than "no answer" (ECONNREFUSED, no leader)
  for (let n = 1; ; n++) {
    const tried = performance.now();
    try {
      return await call(within(Math.min(attemptMs, left())));
    } catch (error) {
      const remaining = left();
      // Every endpoint avoided for a moment (each let a call run out: etcd3's breakers, etcd-client.ts) is as unanswered as a deadline.
      const again = isRecoverableError(error as Error) || isBrokenCircuitError(error);
      if (!isUnanswered(error as Error)) said = error as Error;
      if (!again || remaining < 1) throw isUnanswered(error as Error) ? (said ?? unanswered(error as Error, n, attemptMs, performance.now() - started)) : error;
      if (performance.now() - tried < PAUSE_MS) await new Promise((resolve) => setTimeout(resolve, Math.min(PAUSE_MS, remaining)));
    }
  }
}

/** isUnanswered is true for a failure that says only that no answer came: a deadline that ran out, or every endpoint avoided after one. */
function isUnanswered(error: Error): boolean {
  return error instanceof GRPCDeadlineExceededError || isBrokenCircuitError(error);
}

/**
 * unanswered words a deadline that ran out, or every endpoint avoided after
 * one, as what it is: grpc-js names the stage it was at (often "waiting for
 * name resolution", even for IP addresses), cockatiel its breaker.
 */
function unanswered(error: Error, tries: number, attemptMs: number, tookMs: number): Error {
  return new Error(`etcd did not answer within ${Math.round(tookMs)} ms (${tries} attempt${tries === 1 ? "" : "s"} of at most ${attemptMs} ms)`, {
    cause: error,
  });
}
