import type * as http from "node:http";
import type * as http2 from "node:http2";
import type { AccessPolicy } from "../service/access-policy.js";
import { type AnyStatus, renderStatusPage } from "./status-html.js";

type Request = http.IncomingMessage | http2.Http2ServerRequest;
type Response = http.ServerResponse | http2.Http2ServerResponse;

/** StatusSource builds what the status page shows: a server's (its state and cluster) or a relay's (its upstream's). */
export type StatusSource = () => Promise<AnyStatus>;

/**
 * serveStatusPage answers GET / (the page, drawn on the server:
 * renderStatusPage) and GET /status.json (what it shows: namespaces and
 * their ranks, as GetStats tells them, the cluster, the charts' samples) under the
 * access of GetStats: a token that may call it when tokens are in force
 * (`access`), any known token with metricsAuth (--metrics-auth, as
 * /metrics); in an `authorization: Bearer` header, or for a browser in a
 * `token` query parameter, which the page passes on to its fetches. True
 * when it answered the request.
 */
export function serveStatusPage(req: Request, res: Response, source: StatusSource, access: AccessPolicy | undefined, metricsAuth: boolean): boolean {
  const url = new URL(req.url ?? "/", "http://page");
  if (req.method !== "GET" || (url.pathname !== "/" && url.pathname !== "/status.json")) return false;
  const token = url.searchParams.get("token");
  try {
    access?.check("GetStats", req.headers.authorization ?? (token === null ? undefined : `Bearer ${token}`), metricsAuth);
  } catch (error) {
    res.writeHead(401, { "content-type": "text/plain" });
    res.end(`${(error as Error).message}\n`);
    return true;
  }
  const page = url.pathname === "/";
  source().then(
    (status) => {
      res.writeHead(200, { "content-type": page ? "text/html; charset=utf-8" : "application/json", "cache-control": "no-store" });
      res.end(page ? renderStatusPage(status, Date.now()) : JSON.stringify(status));
    },
    (error: Error) => {
      res.writeHead(503, { "content-type": "application/json" });
      res.end(JSON.stringify({ error: error.message }));
    },
  );
  return true;
}
