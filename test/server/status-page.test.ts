import { execFile } from "node:child_process";
import { mkdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { Histogram, Registry } from "prom-client";
import { describe, expect, it } from "vitest";
import { createMetadataClient } from "../../src/client/index.js";
import { percentile } from "../../src/server/status-history.js";
import { AccessPolicy } from "../../src/service/access-policy.js";
import { CurrentLoad } from "../../src/store/load-progress.js";
import { lacking } from "../support/debian-packages.js";
import { stallingProxy } from "../support/stalling-proxy.js";
import { tempDir } from "../support/temp-dir.js";
import { startTestRelay } from "../support/test-relay.js";
import { startTestServer } from "../support/test-server.js";
import { until } from "../support/until.js";

const missing = lacking("the status page test", "chromium");

/** OUTPUT keeps what the test makes for people to look at (git-ignored). */
const OUTPUT = new URL("../output/", import.meta.url).pathname;

/** chromium runs Debian's chromium headless on a page, letting it run its script for `ms` of virtual time. */
async function chromium(url: string, ms: number, ...args: string[]): Promise<string> {
  const flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", `--virtual-time-budget=${ms}`, ...args, url];
  return (await promisify(execFile)("chromium", flags, { encoding: "utf8", timeout: 60_000, maxBuffer: 16 << 20 })).stdout;
}

/** fill makes a namespace of 2 ranks with keys confirmed and reserved, so that the page has bars to draw. */
async function fill(url: string) {
  const client = createMetadataClient({ baseUrl: url });
  for (const rank of [0, 1]) await client.initializeRank({ namespace: "page", rank, numPages: 16, worldSize: 2 });
  const keys = ["a", "b", "c", "d", "e"];
  const { pages } = await client.batchAllocate({ namespace: "page", rank: 0, keys });
  await client.confirmWrite({ namespace: "page", rank: 0, keys: keys.slice(0, 3), pages: pages.slice(0, 3) }); // 3 used, 2 reserved
  return (await client.getStats({ namespace: "page" })).namespaces[0]!;
}

/** sampled waits until the status page's charts hold two samples with calls of `method` (the server samples every statusSampleMs). */
async function sampled(url: string, method: string): Promise<void> {
  for (;;) {
    const status = (await (await fetch(`${url}/status.json`)).json()) as { history: { samples: { callsPerSecond: Record<string, number> }[] } };
    if (status.history.samples.length >= 2 && status.history.samples.some((s) => (s.callsPerSecond[method] ?? 0) > 0)) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe("the status page without script (curl, a screenshot, scripts off)", () => {
  it("holds every fact as text: who it is, its leader, its members, namespaces, calls and charts", async () => {
    const records = [
      { memberId: "m-leader", url: "http://10.0.0.1:18000", role: "leader", appliedSeq: 42 },
      { memberId: "m-self", url: "http://10.0.0.2:18000", role: "standby", appliedSeq: 40 },
    ];
    const cluster = {
      members: async () => records,
      knownMembers: async () => records,
      leading: () => false,
      memberId: "m-self",
      advertise: "http://10.0.0.2:18000",
      shard: 0,
    };
    const server = await startTestServer({}, undefined, 0, { cluster: cluster as never, statusSampleMs: 100 });
    await fill(server.url);
    await sampled(server.url, "BatchAllocate");
    const page = await (await fetch(`${server.url}/`)).text();
    expect(page).toContain('<h1>hf3fs-metadata <span id="who">standby</span> <span class="muted">member m-self at http://10.0.0.2:18000</span></h1>');
    expect(page).toContain('<p id="leader">leader: <a href="http://10.0.0.1:18000/">http://10.0.0.1:18000</a> (member m-leader)</p>');
    expect(page).toContain("<td>m-self</td><td>http://10.0.0.2:18000</td><td>standby</td><td>40</td><td>2</td>");
    expect(page).toContain('<div id="namespaces"><p>the leader keeps them: see its page</p></div>'); // a standby serves none itself
    expect(page).toMatch(/<td>BatchAllocate<\/td><td>\d+\.\d<\/td>/);
    expect(page).toContain('aria-label="calls per second"');
    expect(page).toContain('aria-label="rank fill, % of pages held"');
    // A single node says so, with the id clients see, and shows its namespaces.
    const single = await startTestServer();
    await fill(single.url);
    expect(await (await fetch(`${single.url}/`)).text()).toMatch(/<tr><td>0<\/td><td>16<\/td><td class="used-pages">3<\/td><td>2<\/td><td>11<\/td>/);
    expect(await (await fetch(`${single.url}/`)).text()).toMatch(
      /<span id="who" class="muted">single-node server http:\/\/127\.0\.0\.1:\d+ \(id [0-9a-f-]{36}\)<\/span>/,
    );
    // Text from a namespace's name is escaped.
    await createMetadataClient({ baseUrl: single.url }).initializeRank({ namespace: "<b>x</b>", rank: 0, numPages: 2 });
    const escaped = await (await fetch(`${single.url}/`)).text();
    expect(escaped).toContain("<h3>&lt;b&gt;x&lt;/b&gt; ");
    expect(escaped).not.toContain("<b>x</b>");
  });
});

describe("the status page of a member of a cluster split into shards", () => {
  /** member is a member record as etcd holds it. */
  const member = (memberId: string, role: string, appliedSeq: number) => ({ memberId, url: `http://${memberId}:18000`, role, appliedSeq, atMs: 0 });
  /** topology is the cluster's shards as the members' topology answers them (which leads per etcd's leader keys). */
  const topology = {
    shardCount: 2,
    shards: [
      { index: 0, members: [{ url: "http://a0:18000", leader: true }] },
      { index: 1, members: [{ url: "http://b0:18000", leader: true }] },
    ],
  };

  it("lists every shard's members, each one's lag behind its own shard's leader and those down; and says its namespaces are its shard's", async () => {
    const own = { running: [member("b0", "leader", 7), member("b1", "standby", 7)], known: [member("b0", "leader", 7), member("b1", "standby", 7)] };
    const cluster = {
      members: async () => own.running,
      knownMembers: async () => own.known,
      leading: () => true,
      memberId: "b0",
      advertise: "http://b0:18000",
      shard: 1,
    };
    const shard0 = { running: [member("a0", "leader", 90), member("a1", "standby", 85)], known: [member("a2", "standby", 60)], leaderId: "a0" };
    const read: unknown[] = [shard0, undefined]; // its own shard: its cluster reads those
    const peers = {
      calls: () => () => Promise.reject(new Error("no call in this test")),
      topology: () => topology,
      shardMembers: async () => read,
      close: () => {},
    };
    const server = await startTestServer({ shards: 2, shard: 1 }, undefined, 0, { cluster: cluster as never, peers: peers as never });
    const page = await (await fetch(`${server.url}/`)).text();
    // Shard 0's members, each one's lag behind shard 0's leader (90), not behind this member's own leader (7).
    expect(page).toContain("<tr><td>0</td><td>a0</td><td>http://a0:18000</td><td>leader</td><td>90</td><td>0</td>");
    expect(page).toContain("<tr><td>0</td><td>a1</td><td>http://a1:18000</td><td>standby</td><td>85</td><td>5</td>");
    expect(page).toContain('<tr><td>0</td><td>a2</td><td>http://a2:18000</td><td class="down">down</td><td>60</td><td>30</td>');
    expect(page).toContain("<tr><td>1</td><td>b1</td><td>http://b1:18000</td><td>standby</td><td>7</td><td>0</td>");
    expect(page).toContain('<p id="shard-share" class="muted">shard 1 of 2: the keys and pages this shard holds');
    // A shard whose etcd did not answer is said to be unread, in its row.
    read[0] = { error: "etcd did not answer" };
    expect(await (await fetch(`${server.url}/`)).text()).toContain(
      '<tr><td>0</td><td colspan="6" class="down">not read from its etcd: etcd did not answer</td></tr>',
    );
  });
});

describe("a percentile from a histogram's buckets", () => {
  it("is the upper bound of the bucket that holds it, between two readings of prom-client's cumulative buckets", async () => {
    const registry = new Registry();
    const histogram = new Histogram({ name: "t", help: "t", buckets: [0.001, 0.01, 0.1], registers: [registry] });
    const read = async () =>
      (await histogram.get()).values
        .filter((v) => v.metricName === "t_bucket")
        .map((v) => [v.labels.le === "+Inf" ? Infinity : Number(v.labels.le), v.value] as [number, number]);
    for (let i = 0; i < 1_000; i++) histogram.observe(0.5); // before: slow calls
    const before = await read();
    for (let i = 0; i < 990; i++) histogram.observe(0.0005);
    for (let i = 0; i < 10; i++) histogram.observe(0.05);
    const now = await read();
    expect(percentile(now, before, 0.99)).toBe(0.001); // 990 of the 1,000 calls since were under 1 ms
    expect(percentile(now, before, 0.995)).toBe(0.1);
    expect(percentile(now, now, 0.99)).toBeUndefined(); // no call between
    expect(percentile(now, [], 0.99)).toBe(0.1); // past the last bound: that bound
  });
});

describe.skipIf(missing !== "")("the status page in a real browser (headless chromium)", () => {
  it("shows each namespace's ranks as GetStats counts them, call rates and charts, refreshed live; and a screenshot", async () => {
    // The page keeps 30 samples: at 500 ms, 15 s, more than chromium may take to draw it (5 s at most, below), so the samples with
    // the calls below are still there when it does (at 100 ms a slow chromium on a busy machine saw only samples without calls).
    const server = await startTestServer({}, undefined, 0, { statusSampleMs: 500 });
    const stats = await fill(server.url);
    await sampled(server.url, "BatchAllocate");
    const dom = await chromium(`${server.url}/`, 5_000, "--dump-dom");
    expect(dom).toContain("<h3>page ");
    expect(dom).toContain(`keys ${stats.keys}`);
    const rows = [...dom.matchAll(/<tr><td>(\d+)<\/td><td>(\d+)<\/td><td class="used-pages">(\d+)<\/td><td>(\d+)<\/td><td>(\d+)<\/td>/g)].map((m) =>
      m.slice(1).map(Number),
    );
    expect(rows).toEqual(stats.ranks.map((r) => [r.rank, r.numPages, r.usedPages, r.reservedPages, r.freePages]));
    expect(rows[0]).toEqual([0, 16, 3, 2, 11]);
    expect(dom).toMatch(/<td>BatchAllocate<\/td><td>\d+\.\d<\/td><td>(\d+\.\d\d)?<\/td>/); // calls/s, and p99 ms when the last sample had calls
    expect(dom).toMatch(/<div id="updated" class="muted">updated \d{4}-\d\d-\d\dT/); // swapped in anew, not "cannot read the page"
    // The charts: a line per method of calls/s, one of p99 latency, one per rank of fill, each a point per sample.
    const charts = [...dom.matchAll(/aria-label="([^"]+)">(.*?)<\/svg>/g)].map(([, name, svg]) => [name, [...svg!.matchAll(/points="([^"]+)"/g)].length]);
    expect(charts).toEqual([
      ["calls per second", expect.any(Number)],
      ["p99 latency, ms", expect.any(Number)],
      ["rank fill, % of pages held", 2],
    ]);
    // Every method has a rate at every sample; a p99 only at the samples with calls of it (at least one).
    const calls = /aria-label="calls per second">(.*?)<\/svg>/.exec(dom)![1]!;
    const points = [...calls.matchAll(/points="([^"]+)"/g)].map(([, p]) => p!.split(" ").length);
    expect(Math.min(...points)).toBeGreaterThanOrEqual(2);
    expect(/aria-label="p99 latency, ms">(.*?)<\/svg>/.exec(dom)![1]).toMatch(/points="\d/);
    expect(dom).toMatch(/page 0: 31\.3/); // rank 0's fill: 5 of 16 pages held
    mkdirSync(OUTPUT, { recursive: true });
    const shot = join(OUTPUT, "status-page.png");
    await chromium(`${server.url}/`, 3_000, `--screenshot=${shot}`, "--window-size=1100,800");
    expect(statSync(shot).size).toBeGreaterThan(5_000);
    expect(readFileSync(shot).subarray(1, 4).toString()).toBe("PNG");
  }, 120_000);

  it("says what the server is loading and how far, while it loads", async () => {
    const loads = new CurrentLoad();
    const server = await startTestServer({}, undefined, 0, { loads });
    let finish!: () => void;
    let reportNow!: (p: { records: number; total: number; elapsedMs: number; done: boolean }) => void;
    const ended = loads.track(
      "loading the store",
      async (report) => {
        reportNow = report;
        report({ records: 450_000, total: 1_000_000, elapsedMs: 1_000, done: false });
        await new Promise<void>((resolve) => (finish = resolve));
      },
      () => undefined,
    );
    const dom = await chromium(`${server.url}/`, 3_000, "--dump-dom");
    expect(dom).toContain('<p id="loading" class="loading">this server is loading the store: 45% (450000 of 1000000 records, 2 s left)</p>');
    // A load whose total is not known yet says how many records so far, as status does, and no time left.
    reportNow({ records: 1_200, total: 0, elapsedMs: 1_000, done: false });
    expect(await chromium(`${server.url}/`, 3_000, "--dump-dom")).toContain(
      '<p id="loading" class="loading">this server is loading the store: 0% (1200 records)</p>',
    );
    finish();
    await ended;
    expect(await chromium(`${server.url}/`, 3_000, "--dump-dom")).toContain('<p id="loading" class="loading"></p>');
  }, 120_000);

  it("asks for the metrics token with --metrics-auth, which a browser gives in the URL; and a relay shows its upstream", async () => {
    const file = join(tempDir(), "tokens");
    writeFileSync(file, "page-secret\n");
    const access = new AccessPolicy({ workerTokenFile: file });
    const server = await startTestServer({}, undefined, 0, { access, authTokenFile: file, metricsAuth: true });
    expect((await fetch(`${server.url}/`)).status).toBe(401);
    expect((await fetch(`${server.url}/status.json`, { headers: { authorization: "Bearer page-secret" } })).status).toBe(200);
    const dom = await chromium(`${server.url}/?token=page-secret`, 3_000, "--dump-dom");
    expect(dom).toContain('<div id="namespaces"><p>none</p></div>'); // status.json was read with the token: no namespace yet
    expect(dom).toMatch(/<div id="updated" class="muted">updated \d{4}-/);
    const open = await startTestServer();
    await fill(open.url);
    const relay = await startTestRelay(open.url);
    const status = (await (await fetch(`${relay.url}/status.json`)).json()) as { kind: string; namespaces: { namespace: string; keys: number }[] };
    expect(status).toMatchObject({ kind: "relay", namespaces: [{ namespace: "page", keys: 3 }] });
    expect(await chromium(`${relay.url}/`, 3_000, "--dump-dom")).toContain("relaying to ");
  }, 120_000);

  it("a relay names where its calls go, and the server its watch found silent while it is", async () => {
    const upstream = await startTestServer();
    const proxy = await stallingProxy(upstream.url); // holds every byte once stalled, as for a paused server
    const relay = await startTestRelay(proxy.url);
    const shown = async () => (await (await fetch(`${relay.url}/status.json`)).json()) as { callsGoTo: string[]; silent: string[] };
    await until(async () => (await shown()).callsGoTo.length === 1);
    let dom = await chromium(`${relay.url}/`, 3_000, "--dump-dom");
    expect(dom).toContain(`<p id="calls-go-to">calls go to ${proxy.url}</p>`);
    expect(dom).not.toContain('id="silent"');
    proxy.stall();
    try {
      await until(async () => (await shown()).silent.length === 1);
      dom = await chromium(`${relay.url}/`, 1_000, "--dump-dom");
    } finally {
      proxy.resume();
    }
    expect(dom).toContain(`<p id="silent" class="down">silent (a PING unanswered: paused, stalled or cut off): ${proxy.url}</p>`);
    expect(dom).not.toContain('id="calls-go-to"'); // no server answers calls while the only one is silent
  }, 120_000);
});

describe("the Grafana dashboard (deploy/grafana/hf3fs-metadata.json)", () => {
  it("asks only for metrics that a server or a relay exports", async () => {
    const dashboard = JSON.parse(readFileSync(new URL("../../deploy/grafana/hf3fs-metadata.json", import.meta.url), "utf8")) as {
      panels: { targets: { expr: string }[] }[];
    };
    const asked = new Set(dashboard.panels.flatMap((p) => p.targets.flatMap((t) => t.expr.match(/hf3fs_[a-z_]+/g) ?? [])));
    // A member of a cluster exports the cluster's series too: a stub of its view gives them here.
    const cluster = { members: async () => [], knownMembers: async () => [], leading: () => true, memberId: "m", advertise: "", shard: 0 } as never;
    const server = await startTestServer({}, undefined, 0, { cluster });
    await fill(server.url);
    const relay = await startTestRelay(server.url);
    await fetch(`${relay.url}/keys/batch_exists`, { method: "POST", body: JSON.stringify({ namespace: "page", keys: ["a"] }) });
    const exported = new Set<string>();
    for (const url of [server.url, relay.url]) {
      for (const line of (await (await fetch(`${url}/metrics`)).text()).split("\n")) if (line.startsWith("# TYPE ")) exported.add(line.split(" ")[2]!);
    }
    const base = (name: string) => name.replace(/_(bucket|sum|count)$/, "");
    expect([...asked].filter((name) => !exported.has(name) && !exported.has(base(name)))).toEqual([]);
    expect(asked.size).toBeGreaterThan(15);
  });
});
