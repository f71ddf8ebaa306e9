import type { EtcdSession } from "../../src/replication/etcd-session.js";

/** heldSession is an etcd session whose lease always holds, whose calls are made once at once, with lease id `id`. */
export function heldSession(id = "lease-now"): EtcdSession {
  return {
    id,
    valid: () => true,
    call: <T>(make: (options: object) => Promise<T>) => make({}),
    lost: new Promise(() => undefined),
  } as unknown as EtcdSession;
}
