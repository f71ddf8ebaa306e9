import { ExponentialBackoff, noop } from "cockatiel";
import { Etcd3, type IOptions } from "etcd3";

/**
 * etcdClient makes a member's etcd client. Its fault handling is the
 * member's own (every call has a deadline, and the member retries what
 * failed), not the etcd3 package's default circuit breaker per host: while
 * etcd elects a new leader every member answers "no leader" for a moment,
 * three such answers opened every host's breaker for 5 s, and writes
 * stopped for 5-7 s after etcd's leader died. Calls still go to the hosts
 * in random order, and a failed one is tried on the next (the package's
 * global retry). A watch stream that broke is opened again within 1 s.
 */
export function etcdClient(options: IOptions): Etcd3 {
  return new Etcd3({
    ...options,
    faultHandling: {
      host: () => noop,
      watchBackoff: new ExponentialBackoff({ initialDelay: 50, maxDelay: 1_000 }).next(),
    },
  });
}
