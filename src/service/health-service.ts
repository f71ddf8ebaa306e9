import { Code, ConnectError, type ServiceImpl } from "@connectrpc/connect";
import { type Health, type HealthCheckRequest, HealthCheckResponse_ServingStatus as ServingStatus } from "../../gen/grpc/health/v1/health_pb.js";
import type { Leadership } from "./leadership.js";
import type { Lifecycle } from "./lifecycle.js";
import type { LoadShedder } from "./load-shedder.js";
import { nextNotice } from "./notifier.js";

/** HealthCheck is Health's Check as a framing calls it without connect-node (the gRPC fast path): the request alone. */
export interface HealthCheck {
  check(request: Pick<HealthCheckRequest, "service">): { status: ServingStatus };
}

/**
 * healthService implements grpc.health.v1.Health. The server ("") is
 * SERVING while the lifecycle accepts calls (not while the state loads)
 * and, in a highly available cluster, while this member is caught up with
 * the log; each of `leaderServices` is SERVING when the server is
 * and, in a cluster, only on the leader, so a readiness probe on it sends
 * all traffic there. Both are NOT_SERVING once the lifecycle drains or
 * refuses calls (shutting down, store failed), and while a shedder says the server is
 * overloaded (Check only: a readiness probe then sends traffic elsewhere).
 * (A relay passes its reach of the upstream as `leadership`: SERVING while
 * it reaches a leader.) Watch sends the status, then each change of it, and ends once the
 * lifecycle drains, so that a draining server is not held open by
 * watchers.
 */
export function healthService(
  lifecycle: Lifecycle,
  leaderServices: readonly string[],
  shedder?: LoadShedder,
  leadership?: Pick<Leadership, "caughtUp" | "refusal" | "next">,
): ServiceImpl<typeof Health> & HealthCheck {
  const known = (service: string) => service === "" || leaderServices.includes(service);
  const running = () => !lifecycle.draining && !lifecycle.starting && (leadership?.caughtUp ?? true);
  const status = (service: string) => (running() && (service === "" || leadership?.refusal === undefined) ? ServingStatus.SERVING : ServingStatus.NOT_SERVING);
  return {
    check(req: Pick<HealthCheckRequest, "service">) {
      if (!known(req.service)) throw new ConnectError(`unknown service "${req.service}"`, Code.NotFound);
      return { status: shedder?.overloaded === true ? ServingStatus.NOT_SERVING : status(req.service) };
    },
    async *watch(req, ctx) {
      if (!known(req.service)) {
        yield { status: ServingStatus.SERVICE_UNKNOWN };
        await lifecycle.stopping(ctx.signal);
        return;
      }
      let last = status(req.service);
      yield { status: last };
      while (!lifecycle.draining && !ctx.signal.aborted) {
        await nextNotice([lifecycle, leadership], ctx.signal);
        const now = status(req.service);
        if (ctx.signal.aborted || now === last) continue;
        last = now;
        yield { status: now };
      }
    },
  };
}
