import type { CallOptions } from "@grpc/grpc-js";

/** within is the options of an etcd call that must be answered within ms (at least 1 ms). */
export function within(ms: number): CallOptions {
  return { deadline: new Date(Date.now() + Math.max(ms, 1)) };
}
