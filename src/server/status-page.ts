import type * as http from "node:http";
import type * as http2 from "node:http2";
import type { AccessPolicy } from "../service/access-policy.js";

type Request = http.IncomingMessage | http2.Http2ServerRequest;
type Response = http.ServerResponse | http2.Http2ServerResponse;

/** StatusSource builds the JSON the status page shows: a server's (its state and cluster) or a relay's (its upstream's). */
export type StatusSource = () => Promise<unknown>;

/**
 * serveStatusPage answers GET / (the page) and GET /status.json (what it
 * shows: namespaces and their ranks, as GetStats tells them) under the
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
  if (url.pathname === "/") {
    res.writeHead(200, { "content-type": "text/html; charset=utf-8", "cache-control": "no-store" });
    res.end(STATUS_PAGE);
    return true;
  }
  source().then(
    (status) => {
      res.writeHead(200, { "content-type": "application/json", "cache-control": "no-store" });
      res.end(JSON.stringify(status));
    },
    (error: Error) => {
      res.writeHead(503, { "content-type": "application/json" });
      res.end(JSON.stringify({ error: error.message }));
    },
  );
  return true;
}

/**
 * STATUS_PAGE is the page: plain HTML and a small script, no build step.
 * Every 2 s it fetches /status.json and draws the load the server runs (if
 * any), the cluster's members (and their loads), each
 * namespace's ranks as bars (used, reserved, free), keys, evictions by
 * cause, and call rates from the change of the call counts.
 */
const STATUS_PAGE = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>hf3fs-metadata</title>
<style>
body{font:14px system-ui,sans-serif;margin:1.5em;color:#222}h1{font-size:1.3em}h2{font-size:1.1em;margin-top:1.5em}
table{border-collapse:collapse}td,th{padding:2px 10px;text-align:left;border-bottom:1px solid #eee}th{color:#666;font-weight:normal}
.bar{display:flex;width:320px;height:14px;background:#e8f5e9;border:1px solid #ccc}.used{background:#1565c0}.reserved{background:#f9a825}
.down{color:#c62828;font-weight:bold}.muted{color:#888}.loading{color:#e65100;font-weight:bold}
</style></head><body>
<h1>hf3fs-metadata <span id="who" class="muted"></span></h1>
<div id="updated" class="muted">loading…</div>
<p id="loading" class="loading"></p>
<h2>Cluster</h2><div id="cluster"></div>
<h2>Namespaces</h2><div id="namespaces"></div>
<h2>Calls per second</h2><div id="calls"></div>
<script>
const token = new URLSearchParams(location.search).get("token");
const esc = (s) => String(s).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);
const table = (head, rows) => "<table><tr>" + head.map((h) => "<th>" + esc(h) + "</th>").join("") + "</tr>" + rows.map((r) => "<tr>" + r.join("") + "</tr>").join("") + "</table>";
const load = (l) => l ? l.task + ": " + l.percent + "% (" + (l.total > 0 ? l.records + " of " + l.total : l.records) + " records" + (l.secondsLeft == null ? "" : ", " + l.secondsLeft + " s left") + ")" : "";
const td = (v, cls) => "<td" + (cls ? ' class="' + cls + '"' : "") + ">" + esc(v) + "</td>";
let last;
async function refresh() {
  try {
    const res = await fetch("status.json" + (token ? "?token=" + encodeURIComponent(token) : ""), { cache: "no-store" });
    const s = await res.json();
    if (!res.ok) throw new Error(s.error || res.status);
    document.getElementById("who").textContent = s.kind + " " + (s.url || "");
    document.getElementById("loading").textContent = s.loading ? "this server is " + load(s.loading) : "";
    const members = s.cluster ? s.cluster.members : [];
    document.getElementById("cluster").innerHTML = s.cluster
      ? table(["member", "url", "role", "applied", "lag", "loading"], members.map((m) => [td(m.memberId), td(m.url), td(m.role, m.role === "down" ? "down" : ""), td(m.appliedSeq), td(m.lag), td(load(m.loading), "loading")]))
      : "<p>" + esc(s.kind === "relay" ? "relaying to " + s.upstream + (s.reachable ? " (reached)" : " (unreachable)") : "single node") + "</p>";
    document.getElementById("namespaces").innerHTML = s.namespaces.length === 0 ? "<p>none</p>" : s.namespaces.map((ns) =>
      "<h3>" + esc(ns.namespace) + ' <span class="muted">world_size ' + esc(ns.worldSize) + ", keys " + esc(ns.keys) + ", complete " + esc(ns.completeKeys) +
      ", evictions " + esc(ns.evictions) + " (orphan " + esc(ns.orphanEvictions) + ", leaf " + esc(ns.leafEvictions) + ", lru " + esc(ns.lruEvictions) + ", inline " + esc(ns.inlineEvictions) + ")</span></h3>" +
      table(["rank", "pages", "used", "reserved", "free", ""], ns.ranks.map((r) => [td(r.rank), td(r.numPages), td(r.usedPages, "used-pages"), td(r.reservedPages), td(r.freePages),
        '<td><div class="bar"><div class="used" style="width:' + (100 * r.usedPages / r.numPages) + '%"></div><div class="reserved" style="width:' + (100 * r.reservedPages / r.numPages) + '%"></div></div></td>']))).join("");
    const now = Date.now();
    const rates = last ? Object.entries(s.calls).map(([m, n]) => [m, (n - (last.calls[m] || 0)) / ((now - last.at) / 1000)]) : [];
    document.getElementById("calls").innerHTML = last ? table(["method", "calls/s"], rates.map(([m, r]) => [td(m), td(r.toFixed(1))])) : "<p class=muted>measuring…</p>";
    last = { at: now, calls: s.calls };
    document.getElementById("updated").textContent = "updated " + new Date(now).toISOString();
  } catch (error) {
    document.getElementById("updated").textContent = "cannot read status.json: " + error.message;
  }
}
refresh();
setInterval(refresh, 2000);
</script></body></html>
`;
