import { Code, ConnectError, type ServiceImpl } from "@connectrpc/connect";
import { type Health, HealthCheckResponse_ServingStatus as ServingStatus } from "../../gen/grpc/health/v1/health_pb.js";
import type { Lifecycle } from "./lifecycle.js";
import type { LoadShedder } from "./load-shedder.js";

/**
 * healthService implements grpc.health.v1.Health: the server ("") and each
 * of `services` are SERVING while the lifecycle accepts calls (the server
 * listens only after recovery), NOT_SERVING once it refuses them (draining,
 * store failed), and while a shedder says the server is overloaded (Check
 * only: a readiness probe then sends traffic elsewhere). Watch sends the
 * status, then the change to NOT_SERVING when the lifecycle refuses calls,
 * then ends, so that a draining server is not held open by watchers.
 */
export function healthService(lifecycle: Lifecycle, services: readonly string[], shedder?: LoadShedder): ServiceImpl<typeof Health> {
  const known = (service: string) => service === "" || services.includes(service);
  const status = () => (lifecycle.refusal === undefined && shedder?.overloaded !== true ? ServingStatus.SERVING : ServingStatus.NOT_SERVING);
  return {
    check(req) {
      if (!known(req.service)) throw new ConnectError(`unknown service "${req.service}"`, Code.NotFound);
      return { status: status() };
    },
    async *watch(req, ctx) {
      if (!known(req.service)) {
        yield { status: ServingStatus.SERVICE_UNKNOWN };
        await lifecycle.refused(ctx.signal);
        return;
      }
      yield { status: status() };
      if (lifecycle.refusal !== undefined) return;
      await lifecycle.refused(ctx.signal);
      if (!ctx.signal.aborted) yield { status: status() };
    },
  };
}
