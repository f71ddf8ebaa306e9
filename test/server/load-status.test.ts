import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import { statusCommand } from "../../src/cli/status-command.js";
import { systemClock } from "../../src/core/clock.js";
import { defaultStateOptions } from "../../src/core/state-options.js";
import type { MemberRecord } from "../../src/replication/cluster-keys.js";
import { etcdClient } from "../../src/replication/etcd-client.js";
import { Member } from "../../src/replication/member.js";
import { Watches } from "../../src/replication/watch.js";
import { createLogger } from "../../src/server/logger.js";
import { AccessPolicy } from "../../src/service/access-policy.js";
import { Leadership } from "../../src/service/leadership.js";
import { LmdbStore } from "../../src/store/lmdb-store.js";
import { CurrentLoad, type LoadProgress } from "../../src/store/load-progress.js";
import { makeCertificates } from "../support/certificates.js";
import { lacking } from "../support/debian-packages.js";
import { startEtcdCluster } from "../support/etcd-cluster.js";
import { stallingProxy } from "../support/stalling-proxy.js";
import { tempDir } from "../support/temp-dir.js";
import { startTestRelay } from "../support/test-relay.js";
import { startTestServer } from "../support/test-server.js";
import { until } from "../support/until.js";

/** gatedLoad starts a load on `loads` that reports `progress` and then waits until `finish` is called. */
function gatedLoad(loads: CurrentLoad, task: string, progress?: LoadProgress) {
  let finish!: () => void;
  const gate = new Promise<void>((resolve) => (finish = resolve));
  const ended = loads.track(
    task,
    async (report) => {
      if (progress !== undefined) report(progress);
      await gate;
    },
    () => undefined,
  );
  return { finish, ended };
}

/** status runs the status command in this process and returns its exit code and what it printed. */
async function status(...args: string[]): Promise<{ code: number; out: string }> {
  const lines: string[] = [];
  const log = vi.spyOn(console, "log").mockImplementation((line: string) => void lines.push(line));
  const write = vi.spyOn(process.stdout, "write").mockImplementation((text: string | Uint8Array) => lines.push(String(text)) > 0);
  try {
    const code = await statusCommand(args);
    return { code, out: lines.join("\n") };
  } finally {
    log.mockRestore();
    write.mockRestore();
  }
}

afterEach(() => vi.restoreAllMocks());

describe("CurrentLoad", () => {
  it("shows a load from its start, with each report, and nothing once it ends or fails", async () => {
    const loads = new CurrentLoad();
    expect(loads.status).toBeUndefined();
    const { finish, ended } = gatedLoad(loads, "loading the store");
    expect(loads.status).toMatchObject({ task: "loading the store", records: 0, percent: 0, secondsLeft: null });
    finish();
    await ended;
    expect(loads.status).toBeUndefined();
    const failing = loads.track(
      "loading a snapshot",
      async () => Promise.reject(new Error("the leader went away")),
      () => undefined,
    );
    expect(loads.status?.task).toBe("loading a snapshot");
    await expect(failing).rejects.toThrow("the leader went away");
    expect(loads.status).toBeUndefined();
  });

  it("shows the load begun last while two overlap, and the other again once that one ends", async () => {
    const loads = new CurrentLoad();
    const first = gatedLoad(loads, "loading the standby state");
    const second = gatedLoad(loads, "loading a snapshot");
    expect(loads.status?.task).toBe("loading a snapshot");
    second.finish();
    await second.ended;
    expect(loads.status?.task).toBe("loading the standby state");
    first.finish();
    await first.ended;
    expect(loads.status).toBeUndefined();
  });

  it("calls a load lasting once it has run for the time asked, so that a member never publishes one of moments", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    try {
      vi.setSystemTime(1_000_000);
      const loads = new CurrentLoad();
      const { finish, ended } = gatedLoad(loads, "loading the standby state");
      vi.setSystemTime(1_000_999);
      expect(loads.lasting(1_000)).toBeUndefined();
      vi.setSystemTime(1_001_000);
      expect(loads.lasting(1_000)?.task).toBe("loading the standby state");
      finish();
      await ended;
      expect(loads.lasting(1_000)).toBeUndefined();
    } finally {
      vi.useRealTimers();
    }
  });
});

describe("status and status.json while a server loads", () => {
  it("a single-node server: loading its store, how far and how long is left (exit 1), then serving (exit 0)", async () => {
    const loads = new CurrentLoad();
    const server = await startTestServer({}, undefined, 0, { loads });
    const { finish, ended } = gatedLoad(loads, "loading the store", { records: 450_000, total: 1_000_000, elapsedMs: 1_000, done: false });
    const page = (await (await fetch(`${server.url}/status.json`)).json()) as { loading: unknown };
    expect(page.loading).toEqual({ task: "loading the store", records: 450_000, total: 1_000_000, percent: 45, recordsPerSecond: 450_000, secondsLeft: 2 });
    const loading = await status("--server", server.url);
    expect(loading).toEqual({
      code: 1,
      out: `single-node server ${server.store.serverId} at ${server.url}: loading the store: 45% (450000 of 1000000 records, 2 s left)`,
    });
    const json = await status("--server", server.url, "--json");
    expect(JSON.parse(json.out)).toMatchObject({ singleNode: true, healthy: false, problems: ["still loading the store"], loading: { percent: 45 } });
    finish();
    await ended;
    expect(await status("--server", server.url)).toEqual({ code: 0, out: `single-node server ${server.store.serverId} at ${server.url}: serving` });
  });

  it.skipIf(lacking("status over TLS", "openssl") !== "")(
    "a single-node server over TLS with --metrics-auth: with the CA and the token, and refused without the token",
    async () => {
      const dir = tempDir();
      const certs = makeCertificates(dir);
      const tokens = join(dir, "tokens");
      writeFileSync(tokens, "status-token\n");
      const tls = { cert: readFileSync(certs.serverCert), key: readFileSync(certs.serverKey) };
      const server = await startTestServer({}, undefined, 0, {
        tls,
        access: new AccessPolicy({ workerTokenFile: tokens }),
        authTokenFile: tokens,
        metricsAuth: true,
      });
      const secured = ["--server", server.url, "--ca-file", certs.ca];
      expect(await status(...secured, "--token-file", tokens)).toEqual({
        code: 0,
        out: `single-node server ${server.store.serverId} at ${server.url}: serving`,
      });
      const errors: string[] = [];
      const error = vi.spyOn(console, "error").mockImplementation((line: string) => void errors.push(line));
      try {
        expect((await status(...secured)).code).toBe(1);
      } finally {
        error.mockRestore();
      }
      expect(errors).toEqual([
        `hf3fs-metadata status: ${server.url}: GET /status.json: 401 GetStats needs a token: send the header authorization: Bearer <token> (status --token-file FILE)`,
      ]);
    },
  );

  it("a relay: whether it reaches a server that answers calls, where its calls go, and which server it found silent", async () => {
    const upstream = await startTestServer();
    const proxy = await stallingProxy(upstream.url); // holds every byte once stalled, as for a paused server
    const relay = await startTestRelay(proxy.url);
    const reaching = `relay at ${relay.url} to ${proxy.url}: reaching a server that answers calls; calls go to ${proxy.url}`;
    await until(async () => (await status("--server", relay.url)).out === reaching);
    expect((await status("--server", relay.url)).code).toBe(0);
    expect(JSON.parse((await status("--server", relay.url, "--json")).out)).toMatchObject({ healthy: true, callsGoTo: [proxy.url], silent: [] });
    proxy.stall();
    const silent = `relay at ${relay.url} to ${proxy.url}: reaching no server that answers calls; silent (a PING unanswered: paused, stalled or cut off): ${proxy.url}`;
    try {
      await until(async () => (await status("--server", relay.url)).out === silent);
    } finally {
      proxy.resume();
    }
    await until(async () => (await status("--server", relay.url)).out === reaching); // heard again
    await upstream.close();
    let gone = await status("--server", relay.url);
    for (let i = 0; i < 300 && gone.code === 0; i++) {
      await new Promise((r) => setTimeout(r, 10));
      gone = await status("--server", relay.url);
    }
    expect(gone).toEqual({ code: 1, out: `relay at ${relay.url} to ${proxy.url}: reaching no server that answers calls` });
  });

  it("a cluster: each member's load as it published it, and the cluster not healthy until it ends", async () => {
    const record = (memberId: string, role: string, loading?: MemberRecord["loading"]): MemberRecord => ({
      memberId,
      url: `http://${memberId}:18000`,
      role,
      appliedSeq: 7,
      atMs: Date.now(),
      ...(loading && { loading }),
    });
    const snapshot = { task: "loading a snapshot", records: 300, total: 1_200, percent: 25, recordsPerSecond: 100, secondsLeft: 9 };
    let members = [record("m1", "leader"), record("m2", "standby", snapshot)];
    const cluster = {
      clusterId: "c1",
      clusterName: "kv",
      memberId: "m1",
      shard: 0,
      leading: () => true,
      members: async () => members,
      knownMembers: async () => members,
      forget: async () => "unknown" as const,
    } as never;
    const server = await startTestServer({}, undefined, 0, { cluster });
    const loading = await status("--server", server.url);
    expect(loading.code).toBe(1);
    expect(loading.out).toContain("member m2: loading a snapshot: 25% (300 of 1200 records, 9 s left)\n");
    expect(loading.out.trim().split("\n").at(-1)).toBe("degraded: 1 member(s) loading");
    const json = JSON.parse((await status("--server", server.url, "--json")).out) as { members: { memberId: string; loading: unknown }[] };
    expect(json.members.find((m) => m.memberId === "m2")?.loading).toEqual({
      task: "loading a snapshot",
      records: 300,
      total: 1_200,
      percent: 25,
      secondsLeft: 9,
    });
    const page = (await (await fetch(`${server.url}/status.json`)).json()) as { cluster: { members: { loading?: unknown }[] } };
    expect(page.cluster.members.map((m) => m.loading)).toEqual([undefined, snapshot]);
    members = [record("m1", "leader"), record("m2", "standby")];
    const done = await status("--server", server.url);
    expect([done.code, done.out.trim().split("\n").at(-1)]).toEqual([0, "healthy"]);
  });
});

const noEtcd = lacking("the member's published load", "etcd");

describe.skipIf(noEtcd !== "")("a member publishes its load with its record", () => {
  it("shows it in etcd within a publish, and not once it ended", async () => {
    const etcd = await startEtcdCluster(1);
    const client = etcdClient({ hosts: etcd.endpoints });
    const watches = new Watches(() => etcdClient({ hosts: etcd.endpoints }));
    const local = await LmdbStore.open(tempDir());
    const options = { clusterName: "loads", leaderLeaseMs: 2_000, state: defaultStateOptions, clock: systemClock };
    const member = await Member.join(client, watches, local, new Leadership(), options, createLogger("silent"));
    member.start("http://127.0.0.1:1");
    try {
      // A record is published every 500 ms; on a busy machine the first term may take seconds to begin.
      const published = async (until: (r: MemberRecord | undefined) => boolean) => {
        let mine: MemberRecord | undefined;
        for (const deadline = Date.now() + 20_000; Date.now() < deadline; await new Promise((resolve) => setTimeout(resolve, 25))) {
          mine = (await member.members()).find((m) => m.memberId === member.memberId);
          if (until(mine)) return mine;
        }
        throw new Error(`the member's record never showed it; it was ${JSON.stringify(mine)}`);
      };
      await published((r) => r?.role === "leader" && r.loading === undefined); // alone, it leads: its own loads are over
      const loadBegan = Date.now();
      const { finish, ended } = gatedLoad(member.loads, "loading a snapshot", { records: 20_000, total: 80_000, elapsedMs: 500, done: false });
      expect((await published((r) => r?.loading !== undefined))?.loading).toMatchObject({
        task: "loading a snapshot",
        records: 20_000,
        total: 80_000,
        percent: 25,
      });
      // Its lasting record (what status shows once it is down), written every 5 s, never holds the load.
      let lasting: MemberRecord | undefined;
      for (const deadline = Date.now() + 20_000; Date.now() < deadline && (lasting?.atMs ?? 0) < loadBegan; await new Promise((r) => setTimeout(r, 100)))
        lasting = (await member.knownMembers()).find((m) => m.memberId === member.memberId);
      expect(lasting?.atMs).toBeGreaterThanOrEqual(loadBegan);
      expect(lasting?.loading).toBeUndefined();
      expect((await published((r) => r?.loading !== undefined))?.loading?.task).toBe("loading a snapshot"); // still running
      finish();
      await ended;
      await published((r) => r !== undefined && r.loading === undefined);
    } finally {
      await member.close();
      client.close();
      watches.close();
      await local.close();
    }
  }, 60_000);
});
