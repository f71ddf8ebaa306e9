import { readFileSync as readPem, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { SERVER_ID_HEADER } from "../../src/protocol/headers.js";
import { makeCertificates } from "../support/certificates.js";
import { type ChildServer, runCli, startChildRelay, startChildServer } from "../support/child-server.js";
import { lacking } from "../support/debian-packages.js";
import { engines } from "../support/engine-clients.js";
import { startEtcdCluster } from "../support/etcd-cluster.js";
import { kill9, type Server, startServer, waitForLeader } from "../support/ha-cluster.js";
import { pause } from "../support/pause.js";
import { tempDir } from "../support/temp-dir.js";
import { freePort } from "../support/test-server.js";
import { until } from "../support/until.js";

const missingCluster = lacking("the relay's cluster tests", "etcd", "requests");
const missingTls = lacking("the relay's TLS test", "etcd", "openssl");
const missingWorker = lacking("the relay's restart test", "requests");
const missingEtcd = lacking("the relay's paused-leader test", "etcd");

/** relayTo starts a relay child process in front of `upstream`, on `port` (a free one unless given). */
async function relayTo(upstream: string, extra: string[] = [], port = 0): Promise<ChildServer> {
  return startChildRelay(["--upstream", upstream, "--port", String(port), ...extra]);
}

/** ENGINES are both engines, their readers idle a second between turns. */
const ENGINES = engines(1);

for (const [engineName, start] of ENGINES) {
  describe.skipIf(missingCluster !== "")(`${engineName} through a relay in front of a cluster`, () => {
    it("kill -9 of the leader, not restarted, then of the next: no error (no rank answered 404 as forgotten), nothing stored lost", async () => {
      const etcd = await startEtcdCluster(3);
      const servers: Server[] = await Promise.all([0, 1, 2].map(() => startServer(etcd)));
      await waitForLeader(servers);
      const relay = await relayTo(servers.map((s) => s.url).join(","));
      const engine = await start(relay.url);
      await engine.progress(5);
      for (let round = 0; round < 2; round++) {
        await kill9(await waitForLeader(servers));
        await engine.progress(5);
      }
      const run = await engine.stop();
      console.log(
        `${engineName} through a relay across 2 leaders killed for good: ${run.calls} calls (the longest ${run.longestCall}), ${run.stored} keys stored`,
      );
      expect(run.errors).toEqual([]);
      expect(await run.missing(relay.url)).toEqual([]);
      const metrics = await (await fetch(`${relay.url}/metrics`)).text();
      expect(metrics).toMatch(/hf3fs_relay_upstream_changes_total [1-9]/); // it moved its calls to each new leader
    }, 120_000);
  });
}

describe.skipIf(missingEtcd !== "")("a relay in front of a cluster whose leader is paused (SIGSTOP) with a call on it", () => {
  it("stopped by SIGTERM while a call waits on the stopped leader, keeps its port (a next call is taken, not refused) until the call is answered, then exits 0", async () => {
    const etcd = await startEtcdCluster(1);
    const servers: Server[] = await Promise.all([0, 1, 2].map(() => startServer(etcd)));
    const leader = await waitForLeader(servers);
    // Its drain outlasts the call's wait (the election; a PING of the stopped leader's connection unanswered for 1 s at most).
    const relay = await relayTo(servers.map((s) => s.url).join(","), ["--shutdown-timeout", "40s"]);
    const post = (path: string, body: unknown) => fetch(relay.url + path, { method: "POST", body: JSON.stringify(body) });
    expect((await post("/rank/0/initialize", { num_pages: 16 })).status).toBe(200);
    const logged = relay.lines.length;
    await pause(leader.process.child.pid!);
    let answered = false;
    const held = post("/keys/batch_exists", { keys: ["k"] }).then(
      async (res) => {
        answered = true;
        return [res.status, res.headers.get(SERVER_ID_HEADER), await res.json()];
      },
      (e) => [`held: ${e.cause}`],
    );
    await new Promise((resolve) => setTimeout(resolve, 300)); // the call on its way to the stopped leader
    relay.child.kill("SIGTERM");
    // Its port stays open while the call waits: a next call is taken and held as well, not refused.
    const next = post("/keys/batch_exists", { keys: ["j"] }).then(
      (res) => res.status,
      (e) => `next: ${e.cause}`,
    );
    // The leader stays stopped until the call is answered (another member leads once its lease lapsed), 30 s at most.
    const deadline = Date.now() + 30_000;
    while (!answered && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
    leader.process.child.kill("SIGCONT");
    const newLeader = await waitForLeader(servers);
    expect(await held).toEqual([200, expect.any(String), { exists: [false] }]);
    expect(newLeader).not.toBe(leader);
    expect(await next).toBe(200);
    expect(await relay.exited).toBe(0);
    // Its log says what it saw from the pause on, once each: the stopped leader silent, the calls gone to
    // the new one (before, they went from the first member listed to the leader its watch found, unless that was the first).
    const said = relay.lines.slice(logged).map((line) => JSON.parse(line) as { msg: string; url?: string });
    const urls = (msg: string) => said.filter((line) => line.msg.startsWith(msg)).map((line) => line.url);
    // No server answers only if its watch found the stopped leader silent before the next was elected (the usual order, not
    // the only one: on a busy machine the election may come first, and the relay then moves with no gap in its reach).
    expect(urls("upstream: no server answers calls").length).toBeLessThanOrEqual(1);
    expect(urls("upstream: the server calls left is silent")).toEqual([leader.url]);
    expect(urls("upstream: calls go to another server")).toEqual([newLeader.url]);
  }, 60_000);
});

for (const [engineName, start] of ENGINES) {
  describe.skipIf(missingWorker !== "")(`a relay restarted under ${engineName}`, () => {
    it("by SIGTERM, and by kill -9, each started again at once on its port: no error, nothing stored lost", async () => {
      const server = await startChildServer(["--in-memory"]);
      const port = await freePort();
      let relay = await relayTo(server.url, [], port);
      const engine = await start(relay.url);
      await engine.progress(5);
      for (const signal of ["SIGTERM", "SIGKILL"] as const) {
        relay.child.kill(signal);
        await relay.exited;
        relay = await relayTo(server.url, [], port);
        await engine.progress(5);
      }
      const run = await engine.stop();
      console.log(`${engineName} across 2 relay restarts: ${run.calls} calls (the longest ${run.longestCall}), ${run.stored} keys stored`);
      expect(run.errors).toEqual([]);
      expect(await run.missing(relay.url)).toEqual([]);
    }, 60_000);
  });
}

describe.skipIf(missingTls !== "")("a relay in front of a cluster with token files and mTLS", () => {
  it("lets an engine with neither token nor TLS call; the same call straight to a member gets 401", async () => {
    const dir = tempDir();
    const certs = makeCertificates(dir);
    const tokens = join(dir, "tokens");
    writeFileSync(tokens, "worker-secret\n");
    const admin = join(dir, "admin-tokens");
    writeFileSync(admin, "admin-secret\n");
    const secure = [
      "--auth-token-file",
      tokens,
      "--admin-token-file",
      admin,
      "--tls-cert",
      certs.serverCert,
      "--tls-key",
      certs.serverKey,
      "--tls-client-ca",
      certs.ca,
    ];
    const etcd = await startEtcdCluster(1);
    const servers = await Promise.all([0, 1].map(() => startServer(etcd, tempDir(), secure)));
    const relay = await relayTo(servers.map((s) => s.url).join(","), [
      "--upstream-token-file",
      tokens,
      "--upstream-ca",
      certs.ca,
      "--upstream-cert",
      certs.clientCert,
      "--upstream-key",
      certs.clientKey,
    ]);
    const post = (url: string, path: string, body: unknown) => fetch(`${url}${path}`, { method: "POST", body: JSON.stringify(body) });
    // The relay's health turns SERVING once it reaches the leader over mTLS (the members' own health needs TLS to ask).
    await until(async () => (await runCli(["health", "--server", relay.url])).code === 0);
    expect((await post(relay.url, "/rank/0/initialize", { num_pages: 16 })).status).toBe(200);
    const allocated = await post(relay.url, "/keys/batch_allocate", { rank: 0, keys: [["k", ""]] });
    expect(await allocated.json()).toEqual({ rank: 0, results: [["k", 0]] });
    expect((await post(relay.url, "/keys/confirm_write", { rank: 0, confirmations: [["k", 0]] })).status).toBe(204);
    expect(await (await post(relay.url, "/keys/batch_exists", { keys: ["k"] })).json()).toEqual({ exists: [true] });
    // Straight to each member, with a client certificate (TLS passes) but no token: 401.
    for (const member of servers) expect(await directStatus(member.url, certs)).toBe(401);
    // With the token, each member answers: the standby forwards to the leader over mTLS with its own certificate.
    for (const member of servers) expect(await directStatus(member.url, certs, "worker-secret")).toBe(200);
  }, 60_000);
});

/** directStatus is the status of a BatchExists straight to a member over mTLS, with `token` or none. */
function directStatus(url: string, certs: ReturnType<typeof makeCertificates>, token?: string): Promise<number> {
  const headers = token === undefined ? {} : { authorization: `Bearer ${token}` };
  return new Promise<number>((resolve, reject) => {
    import("node:https").then(({ request }) => {
      const req = request(
        `${url}/keys/batch_exists`,
        { method: "POST", headers, ca: readPem(certs.ca), cert: readPem(certs.clientCert), key: readPem(certs.clientKey) },
        (res) => {
          res.resume();
          resolve(res.statusCode!);
        },
      );
      req.on("error", reject);
      req.end(JSON.stringify({ keys: ["k"] }));
    }, reject);
  });
}
