import type { ConnectRouter, ServiceImpl } from "@connectrpc/connect";
import type { Registry } from "prom-client";
import { file_grpc_health_v1_health, Health } from "../../gen/grpc/health/v1/health_pb.js";
import { file_grpc_reflection_v1_reflection, ServerReflection as ReflectionV1 } from "../../gen/grpc/reflection/v1/reflection_pb.js";
import { file_grpc_reflection_v1alpha_reflection, ServerReflection as ReflectionV1alpha } from "../../gen/grpc/reflection/v1alpha/reflection_pb.js";
import { file_hf3fs_metadata_v1_metadata, MetadataService } from "../../gen/hf3fs/metadata/v1/metadata_pb.js";
import type { AccessPolicy } from "../service/access-policy.js";
import type { Edge } from "../service/edge.js";
import type { JsonRoute } from "../service/json/json-route.js";
import { jsonRouter } from "../service/json/json-router.js";
import type { MetadataCalls } from "../service/metadata-calls.js";
import { reflectionService } from "../service/reflection-service.js";
import { serveMetrics } from "./metrics-endpoint.js";
import { type StatusSource, serveStatusPage } from "./status-page.js";
import { connectFraming } from "./transport/connect-framing.js";
import type { RequestHandler } from "./transport/dual-protocol-listener.js";

/** SERVICES are the services a server and a relay answer alike, as reflection and health name them (a member adds replication). */
const SERVICES = [MetadataService.typeName, Health.typeName, ReflectionV1.typeName, ReflectionV1alpha.typeName];

/** SurfaceParts are what a server and a relay put behind the same surface: their own MetadataService, health, and pages. */
export interface SurfaceParts {
  edge: Edge;
  /** metadata answers MetadataService: the local handlers, or the upstream. */
  metadata: ServiceImpl<typeof MetadataService>;
  /** calls are the same service as the JSON routes call it. */
  calls: MetadataCalls;
  routes: readonly JsonRoute[];
  /** redirect: a standby's NOT_LEADER naming the leader is a 307 to it on the JSON routes (a server's --standby-calls refuse). */
  redirect: boolean;
  health: ServiceImpl<typeof Health>;
  /** more adds services of one kind of process (a member's replication). */
  more?: (router: ConnectRouter) => void;
  metrics: Registry;
  /** metricsAccess asks /metrics for a known token (--metrics-auth); undefined: open. */
  metricsAccess: AccessPolicy | undefined;
  status: StatusSource;
  access: AccessPolicy | undefined;
  metricsAuth: boolean;
}

/**
 * surface is what a server and a relay serve over connect-node on one
 * port: MetadataService at the edge, health and reflection, and, for
 * what no service takes, /metrics, the status page and the JSON routes.
 */
export function surface(parts: SurfaceParts): RequestHandler {
  const reflection = reflectionService(
    [file_hf3fs_metadata_v1_metadata, file_grpc_health_v1_health, file_grpc_reflection_v1_reflection, file_grpc_reflection_v1alpha_reflection],
    SERVICES,
  );
  const json = jsonRouter(parts.calls, parts.edge, parts.routes, parts.redirect);
  return connectFraming(
    parts.edge,
    parts.metadata,
    (router) => {
      router.service(Health, parts.health);
      router.service(ReflectionV1, reflection);
      router.service(ReflectionV1alpha, reflection as never);
      parts.more?.(router);
    },
    (req, res) => {
      if (req.method === "GET" && req.url?.split("?")[0] === "/metrics")
        return void serveMetrics(parts.metrics, parts.metricsAccess, req.headers.authorization, res);
      if (serveStatusPage(req, res, parts.status, parts.access, parts.metricsAuth)) return;
      void json(req, res);
    },
  );
}
