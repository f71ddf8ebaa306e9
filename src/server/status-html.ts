import { SILENT_MEANS } from "../protocol/ping-within.js";
import type { LoadStatus } from "../store/load-progress.js";
import type { HistorySample } from "./status-history.js";
import type { MemberLine, ServerStatus, ShownShard } from "./status-view.js";

/** ShownNamespace is what the page shows of a namespace: a server's NamespaceStatsView, or the GetStats answer a relay reads upstream. */
export interface ShownNamespace {
  namespace: string;
  worldSize: number;
  keys: number;
  completeKeys: number;
  evictions: number;
  orphanEvictions: number;
  leafEvictions: number;
  lruEvictions: number;
  inlineEvictions: number;
  ranks: readonly { rank: number; numPages: number; usedPages: number; reservedPages: number; freePages: number }[];
}

/** RelayStatus is what a relay's status page shows: its upstream, whether a server answers there, the upstream's namespaces and its own calls. */
export interface RelayStatus {
  kind: "relay";
  url: string;
  upstream: string;
  reachable: boolean;
  /** callsGoTo are the servers its calls go to, one per shard that a server answers calls in. */
  callsGoTo: string[];
  /** silent are the servers its watches found silent (SILENT_MEANS). */
  silent: string[];
  /** shards are the shards it sends to, when more than one. */
  shards?: ShownShard[];
  namespaces: ShownNamespace[];
  calls: Record<string, number>;
  history?: { everyMs: number; samples: readonly HistorySample[] };
}

/** AnyStatus is a status page's facts: a server's or a relay's. */
export type AnyStatus = ServerStatus | RelayStatus;

/**
 * renderStatusPage is the whole status page, drawn on the server: every fact
 * as text and the charts as inline SVG, so that the page without script
 * (curl, a screenshot, a browser with scripts off) shows it all. Its one
 * script swaps in the page anew every 2 s.
 */
export function renderStatusPage(status: AnyStatus, nowMs: number): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>hf3fs-metadata ${esc(title(status))}</title>
<style>
body{font:14px system-ui,sans-serif;margin:1.5em;color:#222}h1{font-size:1.3em}h2{font-size:1.1em;margin-top:1.5em}
table{border-collapse:collapse}td,th{padding:2px 10px;text-align:left;border-bottom:1px solid #eee}th{color:#666;font-weight:normal}
.bar{display:flex;width:320px;height:14px;background:#e8f5e9;border:1px solid #ccc}.used{background:#1565c0}.reserved{background:#f9a825}
.down{color:#c62828;font-weight:bold}.muted{color:#888}.loading{color:#e65100;font-weight:bold}
.charts{display:flex;flex-wrap:wrap;gap:2em}.chart svg{border:1px solid #ddd;background:#fafafa}.legend{font-size:12px}.swatch{display:inline-block;width:10px;height:10px;margin-right:4px}
</style></head><body>
<main id="status">
${header(status)}
<div id="updated" class="muted">updated ${new Date(nowMs).toISOString()}</div>
<p id="loading" class="loading">${"loading" in status && status.loading ? `this server is ${esc(loadText(status.loading))}` : ""}</p>
<h2>Cluster</h2><div id="cluster">${cluster(status)}</div>
<h2>Namespaces</h2><div id="namespaces">${standby(status) ? "<p>the leader keeps them: see its page</p>" : shardShare(status) + namespaces(status.namespaces)}</div>
<h2>Calls per second</h2><div id="calls">${callRates(status.history?.samples ?? [])}</div>
<h2>The last minutes</h2><div id="charts" class="charts">${charts(status)}</div>
</main>
<script>
// Draws nothing itself: fetches the page again and swaps its facts in, every 2 s.
setInterval(async () => {
  try {
    const res = await fetch(location.href, { cache: "no-store" });
    if (!res.ok) throw new Error(res.status + " " + (await res.text()));
    const page = new DOMParser().parseFromString(await res.text(), "text/html");
    document.getElementById("status").replaceWith(page.getElementById("status"));
  } catch (error) {
    document.getElementById("updated").textContent = "cannot read the page: " + error.message;
  }
}, 2000);
</script></body></html>
`;
}

/** standby is true on a standby's page: its state is the leader's log, not served, so the namespaces are on the leader's page. */
function standby(status: AnyStatus): boolean {
  return status.kind === "server" && status.self !== undefined && status.self.role !== "leader";
}

/** shardShare says, on a server of one shard of several, that its namespaces count only the pages its shard holds. */
function shardShare(status: AnyStatus): string {
  if (status.kind !== "server" || status.shard === undefined) return "";
  const { index, count } = status.shard;
  return `<p id="shard-share" class="muted">shard ${index} of ${count}: the keys and pages this shard holds (a relay's page, or GetStats, sums every shard)</p>`;
}

/** title names what the page is about in a few words. */
function title(status: AnyStatus): string {
  if (status.kind === "relay") return `relay ${status.url}`;
  return status.self ? `${status.self.role} ${status.self.url}` : `server ${status.url}`;
}

/** header says who this is: a member (its id, role and advertise URL, and on a standby its leader), a single-node server, or a relay. */
function header(status: AnyStatus): string {
  if (status.kind === "relay") {
    return `<h1>hf3fs-metadata relay <span id="who" class="muted">${esc(status.url)} to ${esc(status.upstream)}</span></h1>`;
  }
  if (status.self === undefined) {
    return `<h1>hf3fs-metadata <span id="who" class="muted">single-node server ${esc(status.url)} (id ${esc(status.serverId)})</span></h1>`;
  }
  const { memberId, url, role } = status.self;
  const leader =
    role === "leader"
      ? ""
      : status.leader === undefined
        ? `<p id="leader" class="down">no leader known</p>`
        : `<p id="leader">leader: <a href="${esc(status.leader.url)}/">${esc(status.leader.url)}</a> (member ${esc(status.leader.memberId)})</p>`;
  return `<h1>hf3fs-metadata <span id="who">${esc(role)}</span> <span class="muted">member ${esc(memberId)} at ${esc(url)}</span></h1>${leader}`;
}

/** cluster lists a cluster's members (and its shards, when split), or says what stands in for one. */
function cluster(status: AnyStatus): string {
  const split = status.shards === undefined ? "" : shards(status.shards);
  if (status.kind === "relay") return relayed(status) + split;
  if (status.cluster === undefined) return `<p>single node</p>${split}`;
  const head = ["member", "url", "role", "applied", "lag", "loading"];
  // Split into shards, every shard's members, each one's lag behind its own shard's leader; else this cluster's.
  if (status.shards?.every((s) => s.lines !== undefined || s.unread !== undefined)) {
    const rows = status.shards.flatMap((s) =>
      s.lines === undefined
        ? [[td(s.index), `<td colspan="${head.length}" class="down">not read from its etcd: ${esc(s.unread)}</td>`]]
        : s.lines.map((m) => [td(s.index), ...memberCells(m)]),
    );
    return split + table(["shard", ...head], rows);
  }
  return split + table(head, status.cluster.members.map(memberCells));
}

/** memberCells are a member's cells in the members' table: its id, URL, role (down in red), last entry applied, lag and load. */
function memberCells(m: MemberLine): string[] {
  return [
    td(m.memberId),
    td(m.url),
    td(m.role, m.role === "down" ? "down" : ""),
    td(m.appliedSeq),
    td(m.lag ?? ""),
    td(m.loading ? loadText(m.loading) : "", "loading"),
  ];
}

/** relayed says where a relay's calls go and which servers it found silent, as `status` does, so that a stall's server is named. */
function relayed(status: RelayStatus): string {
  const reach = `<p>relaying to ${esc(status.upstream)} ${status.reachable ? "(reached)" : "(unreachable)"}</p>`;
  const going = status.callsGoTo.length === 0 ? "" : `<p id="calls-go-to">calls go to ${list(status.callsGoTo)}</p>`;
  const silent = status.silent.length === 0 ? "" : `<p id="silent" class="down">silent (${SILENT_MEANS}): ${list(status.silent)}</p>`;
  return reach + going + silent;
}

/** list is URLs as text, comma-separated. */
function list(urls: readonly string[]): string {
  return urls.map(esc).join(", ");
}

/** shards lists the shards of a cluster split into shards: each one's leader (or that none is known) and its members. */
function shards(list: readonly ShownShard[]): string {
  return `<p id="shards">${list.length} shards</p>${table(
    ["shard", "leader", "members"],
    list.map((s) => {
      const leader = s.members.find((m) => m.leader);
      return [td(s.index), td(leader?.url ?? "none known", leader ? "" : "down"), td(s.members.map((m) => m.url).join(", "))];
    }),
  )}`;
}

/** namespaces draws each namespace's counts and its ranks as rows with a bar (used, reserved, free). */
function namespaces(list: readonly ShownNamespace[]): string {
  if (list.length === 0) return "<p>none</p>";
  return list
    .map(
      (ns) =>
        `<h3>${esc(ns.namespace)} <span class="muted">world_size ${esc(ns.worldSize)}, keys ${esc(ns.keys)}, complete ${esc(ns.completeKeys)}, evictions ${esc(ns.evictions)} (orphan ${esc(ns.orphanEvictions)}, leaf ${esc(ns.leafEvictions)}, lru ${esc(ns.lruEvictions)}, inline ${esc(ns.inlineEvictions)})</span></h3>` +
        table(
          ["rank", "pages", "used", "reserved", "free", ""],
          ns.ranks.map((r) => [
            td(r.rank),
            td(r.numPages),
            td(r.usedPages, "used-pages"),
            td(r.reservedPages),
            td(r.freePages),
            `<td><div class="bar"><div class="used" style="width:${(100 * r.usedPages) / r.numPages}%"></div><div class="reserved" style="width:${(100 * r.reservedPages) / r.numPages}%"></div></div></td>`,
          ]),
        ),
    )
    .join("");
}

/** callRates is the last sample's calls/s by method. */
function callRates(samples: readonly HistorySample[]): string {
  const last = samples.at(-1);
  if (last === undefined) return '<p class="muted">measuring…</p>';
  return table(
    ["method", "calls/s", "p99 ms"],
    Object.entries(last.callsPerSecond).map(([method, rate]) => [td(method), td(rate.toFixed(1)), td(last.p99Ms[method]?.toFixed(2) ?? "")]),
  );
}

/** charts draws calls/s and p99 latency by method, and each rank's fill, over the samples kept. */
function charts(status: AnyStatus): string {
  const history = status.history;
  if (history === undefined || history.samples.length < 2) return '<p class="muted">measuring…</p>';
  const span = `${Math.round((history.samples.length * history.everyMs) / 1_000)} s`;
  return [
    chart("calls per second", history.samples, (s) => s.callsPerSecond, span),
    chart("p99 latency, ms", history.samples, (s) => s.p99Ms, span),
    chart("rank fill, % of pages held", history.samples, (s) => Object.fromEntries(Object.entries(s.fill).map(([k, v]) => [k, v * 100])), span),
  ].join("");
}

const COLORS = ["#1565c0", "#c62828", "#2e7d32", "#f9a825", "#6a1b9a", "#00838f", "#ef6c00", "#4e342e"];
const WIDTH = 360;
const HEIGHT = 100;

/** chart is one SVG chart of series over the samples, with a legend giving each series' last value; the scale is the largest value. */
function chart(name: string, samples: readonly HistorySample[], pick: (s: HistorySample) => Record<string, number>, span: string): string {
  const values = samples.map(pick);
  const series = [...new Set(values.flatMap((v) => Object.keys(v)))].slice(0, COLORS.length);
  const max = Math.max(1e-9, ...values.flatMap((v) => series.map((k) => v[k] ?? 0)));
  const x = (i: number) => ((i * WIDTH) / Math.max(samples.length - 1, 1)).toFixed(1);
  const y = (v: number) => (HEIGHT - (v * (HEIGHT - 4)) / max).toFixed(1);
  const lines = series.map(
    // A sample without the series (no call to time) is no point: the line joins the samples that have one.
    (key, i) =>
      `<polyline fill="none" stroke="${COLORS[i]}" stroke-width="1.5" points="${values.flatMap((v, at) => (v[key] === undefined ? [] : [`${x(at)},${y(v[key])}`])).join(" ")}"/>`,
  );
  const legend = series.map((key, i) => {
    const last = values.at(-1)?.[key];
    return `<div><span class="swatch" style="background:${COLORS[i]}"></span>${esc(key)}: ${last === undefined ? "none" : esc(round(last))}</div>`;
  });
  return `<div class="chart"><div>${esc(name)} <span class="muted">(last ${span}, top ${esc(round(max))})</span></div><svg width="${WIDTH}" height="${HEIGHT}" viewBox="0 0 ${WIDTH} ${HEIGHT}" role="img" aria-label="${esc(name)}">${lines.join("")}</svg><div class="legend">${legend.join("") || "no data"}</div></div>`;
}

/** round writes a chart's number shortly. */
function round(v: number): string {
  return v >= 100 ? v.toFixed(0) : v >= 1 ? v.toFixed(1) : v.toFixed(3);
}

/** loadText says what a long load has done: its task, how far, how long left (as `status` prints it). */
function loadText(l: LoadStatus): string {
  return `${l.task}: ${l.percent}% (${l.total > 0 ? `${l.records} of ${l.total}` : l.records} records${l.secondsLeft == null ? "" : `, ${l.secondsLeft} s left`})`;
}

/** table is an HTML table of a head row and rows of cells (td). */
function table(head: readonly string[], rows: readonly string[][]): string {
  return `<table><tr>${head.map((h) => `<th>${esc(h)}</th>`).join("")}</tr>${rows.map((r) => `<tr>${r.join("")}</tr>`).join("")}</table>`;
}

/** td is a cell of text, with a class if given. */
function td(value: unknown, cls = ""): string {
  return `<td${cls ? ` class="${cls}"` : ""}>${esc(value)}</td>`;
}

/** esc makes text safe in HTML text and attributes. */
function esc(value: unknown): string {
  return String(value).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]!);
}
