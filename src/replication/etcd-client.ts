import { ConsecutiveBreaker, circuitBreaker, ExponentialBackoff, handleWhen, noop } from "cockatiel";
import { Etcd3, GRPCDeadlineExceededError, type IOptions } from "etcd3";

/** SILENT_HOST_MS is how long calls avoid an endpoint after it let one go unanswered to its deadline. */
const SILENT_HOST_MS = 1_000;

/**
 * etcdClient makes a member's etcd client. Its fault handling is the
 * member's own (every call has a deadline per attempt, and the member
 * retries what failed: within.ts's attempts), not the etcd3 package's
 * default circuit breaker per host: while etcd elects a new leader every
 * member answers "no leader" for a moment, three such answers opened every
 * host's breaker for 5 s, and writes stopped for 5-7 s after etcd's leader
 * died. Only an endpoint that lets a call run out its deadline (paused,
 * partitioned) is avoided, for SILENT_HOST_MS: the calls after it go to
 * the others at once instead of meeting it again by chance. A minority of
 * the endpoints at most: when more let calls run out, etcd itself is
 * stalled (its leader paused, the others forwarding to it until they elect
 * another), and avoiding them all left no endpoint for a second, so that
 * the member's lease lapsed. Calls go to the hosts in random order
 * otherwise; a failed one is made again by the member (attempts), each
 * time with a deadline of its own. A watch stream that broke is opened
 * again within 1 s.
 */
export function etcdClient(options: IOptions): Etcd3 {
  const hosts = typeof options.hosts === "string" ? [options.hosts] : (options.hosts ?? []);
  const avoided = new Set<string>();
  const mayAvoid = Math.floor((hosts.length - 1) / 2);
  return new Etcd3({
    ...options,
    faultHandling: {
      host: (host) => {
        const silent = (error: Error) => error instanceof GRPCDeadlineExceededError && (avoided.has(host) || avoided.size < mayAvoid);
        const breaker = circuitBreaker(handleWhen(silent), { halfOpenAfter: SILENT_HOST_MS, breaker: new ConsecutiveBreaker(1) });
        breaker.onBreak(() => avoided.add(host));
        breaker.onHalfOpen(() => avoided.delete(host));
        breaker.onReset(() => avoided.delete(host));
        return breaker;
      },
      // No retry of the package's own: it sent a call again with the deadline its first try ran out, so it met every other host with none left.
      global: noop,
      watchBackoff: new ExponentialBackoff({ initialDelay: 50, maxDelay: 1_000 }).next(),
    },
  });
}
