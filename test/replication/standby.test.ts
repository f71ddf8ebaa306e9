import { execFile, execFileSync } from "node:child_process";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { MetadataService } from "../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { createMetadataClient } from "../../src/client/index.js";
import { runCli, startChildServer } from "../support/child-server.js";
import { lacking } from "../support/debian-packages.js";
import { freePort, startEtcdCluster } from "../support/etcd-cluster.js";
import { kill9, type Server, serving, startServer, waitForLeader } from "../support/ha-cluster.js";

const missing = lacking("the HA redirect tests", "etcd");

const exec = promisify(execFile);
const ROOT = new URL("../..", import.meta.url).pathname;

/** PYTHON_POST posts a JSON body with requests, as vLLM's and SGLang's clients do, and prints the status and body it ends with. */
const PYTHON_POST = `
import json, sys, requests
r = requests.post(sys.argv[1], json=json.loads(sys.argv[2]), timeout=10)
print(json.dumps({"status": r.status_code, "history": [h.status_code for h in r.history], "body": r.json() if r.content else None}))
`;

import { until } from "../support/until.js";

/** REFUSE makes standbys refuse calls (--standby-calls refuse), for the clients that route themselves, which these tests are about. */
const REFUSE = ["--standby-calls", "refuse"];

/** untilNamesLeader polls a standby until it names the leader (it does once it has read the leader key), and returns its redirect of an InitializeRank. */
async function untilNamesLeader(standby: Server): Promise<Response> {
  const init = async () => fetch(`${standby.url}/rank/0/initialize`, { method: "POST", body: JSON.stringify({ num_pages: 16 }), redirect: "manual" });
  let redirect = await init();
  const deadline = Date.now() + 10_000;
  while (redirect.status !== 307 && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 100));
    redirect = await init();
  }
  return redirect;
}

/** statusJson is `status --json` of a member. */
async function statusJson(url: string): Promise<Record<string, unknown>> {
  return JSON.parse((await runCli(["status", "--server", url, "--json"])).stdout) as Record<string, unknown>;
}

describe.skipIf(missing !== "")("high availability on etcd: a standby's answers", () => {
  it("a standby is healthy but not for MetadataService, and redirects a vLLM call to the leader (307): a client that follows it succeeds", async () => {
    const etcd = await startEtcdCluster(1);
    const servers = await Promise.all([startServer(etcd, undefined, REFUSE), startServer(etcd, undefined, REFUSE)]);
    const leader = await waitForLeader(servers);
    const standby = servers.find((s) => s !== leader)!;
    const redirect = await untilNamesLeader(standby);
    expect(redirect.status).toBe(307);
    // Health: both serve (they are caught up), only the leader serves MetadataService.
    expect(await serving(standby, "")).toBe(true);
    expect(await serving(standby, MetadataService.typeName)).toBe(false);
    expect(await serving(leader, MetadataService.typeName)).toBe(true);
    expect(redirect.headers.get("location")).toBe(`${leader.url}/rank/0/initialize`);
    expect(await redirect.json()).toMatchObject({ reason: "REASON_NOT_LEADER" });

    const followed = await fetch(`${standby.url}/keys/batch_allocate`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ rank: 0, keys: [["k", ""]] }),
    });
    expect(followed.status).toBe(404); // the rank is not initialized yet: the leader answered
    const { stdout } = await exec("/usr/bin/python3", ["-c", PYTHON_POST, `${standby.url}/rank/0/initialize`, JSON.stringify({ num_pages: 16 })]);
    expect(JSON.parse(stdout)).toEqual({ status: 200, history: [307], body: { message: "rank 0 initialized with 16 pages" } });
    const { stdout: allocated } = await exec("/usr/bin/python3", [
      "-c",
      PYTHON_POST,
      `${standby.url}/keys/batch_allocate`,
      JSON.stringify({ rank: 0, keys: [["k", ""]] }),
    ]);
    expect(JSON.parse(allocated)).toEqual({ status: 200, history: [307], body: { rank: 0, results: [["k", 0]] } });
  }, 60_000);

  it("the Python and TypeScript clients go to the leader a standby names, past a member that is down", async () => {
    execFileSync("bash", [`${ROOT}examples/python/generate.sh`]);
    const etcd = await startEtcdCluster(1);
    const servers = await Promise.all([startServer(etcd, undefined, REFUSE), startServer(etcd, undefined, REFUSE)]);
    const leader = await waitForLeader(servers);
    const standby = servers.find((s) => s !== leader)!;
    await untilNamesLeader(standby);
    // Given only the standby, the client can succeed only by going where it points.
    const targets = standby.url.replace("http://", "");
    const run = await exec("/usr/bin/python3", [`${ROOT}examples/python/worker.py`, "--server", targets], { encoding: "utf8", timeout: 30_000 });
    const lines = run.stdout.trim().split("\n");
    expect(lines[1]).toBe("allocated 4 keys: pages [0, 1, 2, 3]");
    expect(lines[3]).toBe("exists [True, True, True, True, False]");
    const client = createMetadataClient({ baseUrl: standby.url, retry: { deadlineMs: 5_000 } });
    expect((await client.batchExists({ namespace: "python-worker", keys: ["x"] })).exists).toEqual([false]);

    // A member that is down first in the list: both clients move on to the next, which points them to the leader.
    const down = `127.0.0.1:${await freePort()}`;
    const past = await exec("/usr/bin/python3", [`${ROOT}examples/python/worker.py`, "--server", `${down},${targets}`], { encoding: "utf8", timeout: 30_000 });
    expect(past.stdout.trim().split("\n")[0]).toMatch(/^initialized rank 0: created=False /);
    const pastDown = createMetadataClient({ baseUrl: `http://${down},${standby.url}`, retry: { deadlineMs: 5_000 } });
    expect((await pastDown.batchExists({ namespace: "python-worker", keys: ["x"] })).exists).toEqual([false]);
  }, 60_000);

  it("status and /metrics, on any member, show the members, the leader and each one's applied log entry", async () => {
    const etcd = await startEtcdCluster(1);
    const servers = await Promise.all([startServer(etcd), startServer(etcd)]);
    const leader = await waitForLeader(servers);
    const standby = servers.find((s) => s !== leader)!;
    const { code, stdout } = await runCli(["status", "--server", standby.url]);
    expect(code).toBe(0);
    const lines = stdout.trim().split("\n");
    expect(lines[0]).toMatch(new RegExp(`^cluster default \\([0-9a-f-]{36}\\): leader ${leader.url}$`));
    expect(lines[1]).toMatch(/^MEMBER +URL +ROLE +APPLIED +LAG +LAST SEEN$/);
    expect(lines[2]).toMatch(new RegExp(`^[0-9a-f-]{36}  ${leader.url} +leader +\\d+ +0 +now$`));
    expect(lines[3]).toMatch(new RegExp(`^[0-9a-f-]{36}  ${standby.url} +standby +\\d+ +\\d+ +now$`));
    expect(lines[4]).toBe("healthy");
    const metrics = await (await fetch(`${standby.url}/metrics`)).text();
    expect(metrics).toMatch(
      new RegExp(`hf3fs_metadata_cluster_member_applied_seq\\{shard="0",member="[0-9a-f-]{36}",url="${leader.url}",role="leader"\\} \\d+`),
    );
    expect(metrics).toMatch(/^hf3fs_metadata_cluster_leader\{shard="0"\} 0$/m);
    expect(await (await fetch(`${leader.url}/metrics`)).text()).toMatch(/^hf3fs_metadata_cluster_leader\{shard="0"\} 1$/m);

    // A member killed for good shows as down, with when it was last seen, and the cluster as degraded, until it is forgotten.
    const third = await startServer(etcd);
    await until(async () => ((await statusJson(standby.url)).members as unknown[]).length === 3);
    const thirdId = ((await statusJson(standby.url)).members as { memberId: string; url: string }[]).find((m) => m.url === third.url)!.memberId;
    expect((await runCli(["status", "--server", standby.url, "--forget", thirdId])).code).toBe(1); // it runs: nothing to forget
    await kill9(third);
    await until(async () => ((await statusJson(standby.url)).members as { role: string }[]).some((m) => m.role === "down"));
    const degraded = await runCli(["status", "--server", standby.url]);
    expect(degraded.code).toBe(1);
    expect(degraded.stdout).toMatch(new RegExp(`${thirdId}  ${third.url} +down +\\d+ +\\d+ +(now|\\d+s ago)`));
    expect(degraded.stdout.trim().split("\n").at(-1)).toBe("degraded: 1 member(s) down");
    const report = await statusJson(standby.url);
    expect(report).toMatchObject({ healthy: false, problems: ["1 member(s) down"], leader: leader.url });
    expect((await runCli(["status", "--server", leader.url, "--forget", thirdId])).stdout.trim()).toBe(`forgot member ${thirdId}`);
    expect((await runCli(["status", "--server", standby.url])).code).toBe(0);
    expect((await runCli(["status", "--server", standby.url, "--forget", thirdId])).stderr).toMatch(/knows no member/);

    const alone = await startChildServer();
    const single = await runCli(["status", "--server", alone.url]);
    expect(single.code).toBe(0);
    expect(single.stdout.trim()).toMatch(new RegExp(`^single-node server [0-9a-f-]+ at ${alone.url}: serving$`));
  }, 60_000);
});
