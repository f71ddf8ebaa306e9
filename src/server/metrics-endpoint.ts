import type * as http from "node:http";
import type * as http2 from "node:http2";
import type { Registry } from "prom-client";
import type { AccessPolicy } from "../service/access-policy.js";

/** serveMetrics answers GET /metrics from a registry (a server's, a relay's), after a token check when access is given (--metrics-auth). */
export async function serveMetrics(
  registry: Registry,
  access: AccessPolicy | undefined,
  authorization: string | undefined,
  res: http.ServerResponse | http2.Http2ServerResponse,
): Promise<void> {
  try {
    access?.check("metrics", authorization, true);
  } catch (error) {
    res.writeHead(401, { "content-type": "text/plain" });
    res.end(`${(error as Error).message}\n`);
    return;
  }
  let body: string;
  try {
    body = await registry.metrics();
  } catch (error) {
    // A collector that throws fails this scrape, not the process (an unhandled rejection would end it).
    res.writeHead(500, { "content-type": "text/plain" });
    res.end(`metrics could not be collected: ${(error as Error).message}\n`);
    return;
  }
  res.writeHead(200, { "content-type": registry.contentType });
  res.end(body);
}
