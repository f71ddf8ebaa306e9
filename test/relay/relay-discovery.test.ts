import { createSocket } from "node:dgram";
import type { SrvRecord } from "node:dns";
import { Resolver } from "node:dns/promises";
import { describe, expect, it } from "vitest";
import { createMetadataClient } from "../../src/client/index.js";
import { relayOptions } from "../../src/relay/relay-options.js";
import { srvUpstream, UpstreamDiscovery } from "../../src/relay/upstream-discovery.js";
import { lacking } from "../support/debian-packages.js";
import { startEtcdCluster } from "../support/etcd-cluster.js";
import { kill9, startServer, waitForLeader } from "../support/ha-cluster.js";
import { startTestRelay } from "../support/test-relay.js";

const missing = lacking("the relay that finds a cluster's members by DNS", "etcd");

describe("an --upstream of the SRV form", () => {
  it("names a scheme and an SRV name; a list of URLs is not one", () => {
    expect(srvUpstream("srv+https://_grpc._tcp.hf3fs-metadata-members.ns.svc.cluster.local")).toEqual({
      scheme: "https",
      name: "_grpc._tcp.hf3fs-metadata-members.ns.svc.cluster.local",
    });
    expect(srvUpstream("srv+http://_grpc._tcp.m/")).toEqual({ scheme: "http", name: "_grpc._tcp.m" });
    expect(srvUpstream("https://10.0.0.1:18000,https://10.0.0.2:18000")).toBeUndefined();
    expect(srvUpstream("srv+ftp://x")).toBeUndefined();
  });

  it("is what relay takes at start, as a list of URLs is; anything else is refused, naming the flag", () => {
    const resolve = (upstream: string) => relayOptions({ upstream }, (field) => `--${field}`);
    expect(resolve("srv+https://_grpc._tcp.m.ns.svc.cluster.local").upstream).toBe("srv+https://_grpc._tcp.m.ns.svc.cluster.local");
    expect(() => resolve("srv+https://a,srv+https://b")).toThrow(/--upstream takes http:\/\/ or https:\/\/ URLs of servers, or one srv\+https:\/\//);
  });

  it("reads each record as a member at scheme://target:port, sorted, once each; nothing when the name does not resolve", async () => {
    const records: SrvRecord[] = [
      { name: "m-1.members.ns.svc.cluster.local.", port: 18000, priority: 0, weight: 50 },
      { name: "m-0.members.ns.svc.cluster.local", port: 18000, priority: 0, weight: 50 },
      { name: "m-0.members.ns.svc.cluster.local", port: 18000, priority: 0, weight: 50 },
    ];
    const form = { scheme: "https" as const, name: "_grpc._tcp.members.ns.svc.cluster.local" };
    const asked: string[] = [];
    const found = new UpstreamDiscovery(
      form,
      () => {},
      async (name) => {
        asked.push(name);
        return records;
      },
    );
    expect(await found.members()).toEqual(["https://m-0.members.ns.svc.cluster.local:18000", "https://m-1.members.ns.svc.cluster.local:18000"]);
    expect(asked).toEqual([form.name]);
    const failing = new UpstreamDiscovery(
      form,
      () => {},
      async () => Promise.reject(Object.assign(new Error("queryNotFound"), { code: "ENOTFOUND" })),
    );
    expect(await failing.members()).toEqual([]);
  });
});

/**
 * srvServer is a DNS server on 127.0.0.1 (UDP) that answers every query with `records()` as SRV
 * records (RFC 2782) of the name asked: what CoreDNS answers for a headless Service's named port.
 */
async function srvServer(records: () => { target: string; port: number }[]): Promise<{ address: string; close(): void }> {
  const socket = createSocket("udp4");
  socket.on("message", (query, peer) => {
    const questionEnd = 12 + questionLength(query.subarray(12));
    const answers = records().map(({ target, port }) => {
      const name = encodeName(target);
      const rdata = Buffer.concat([Buffer.from([0, 0, 0, 1, port >> 8, port & 0xff]), name]); // priority 0, weight 1
      const head = Buffer.alloc(12);
      head.writeUInt16BE(0xc00c, 0); // the question's name
      head.writeUInt16BE(33, 2); // SRV
      head.writeUInt16BE(1, 4); // IN
      head.writeUInt32BE(30, 6); // TTL
      head.writeUInt16BE(rdata.length, 10);
      return Buffer.concat([head, rdata]);
    });
    const header = Buffer.from(query.subarray(0, 12));
    header.writeUInt16BE(0x8180, 2); // a response, recursion available, no error
    header.writeUInt16BE(answers.length, 6);
    header.writeUInt32BE(0, 8);
    socket.send(Buffer.concat([header, query.subarray(12, questionEnd), ...answers]), peer.port, peer.address);
  });
  await new Promise<void>((resolve) => socket.bind(0, "127.0.0.1", resolve));
  return { address: `127.0.0.1:${socket.address().port}`, close: () => socket.close() };
}

/** questionLength is the length of a DNS question: its name's labels, then type and class. */
function questionLength(question: Buffer): number {
  let at = 0;
  while (question[at]! !== 0) at += question[at]! + 1;
  return at + 1 + 4;
}

/** encodeName writes a name as DNS labels. */
function encodeName(name: string): Buffer {
  return Buffer.concat([...name.split(".").map((label) => Buffer.concat([Buffer.from([label.length]), Buffer.from(label)])), Buffer.from([0])]);
}

describe("the SRV lookup over DNS (node's resolver against a DNS server on loopback)", () => {
  it("reads a headless Service's records as its members' URLs", async () => {
    const server = await srvServer(() => [
      { target: "hf3fs-metadata-1.hf3fs-metadata-members.ns.svc.cluster.local", port: 18000 },
      { target: "hf3fs-metadata-0.hf3fs-metadata-members.ns.svc.cluster.local", port: 18000 },
    ]);
    const resolver = new Resolver();
    resolver.setServers([server.address]);
    const form = srvUpstream("srv+https://_grpc._tcp.hf3fs-metadata-members.ns.svc.cluster.local")!;
    const members = await new UpstreamDiscovery(
      form,
      () => {},
      (name) => resolver.resolveSrv(name),
    ).members();
    server.close();
    expect(members).toEqual([
      "https://hf3fs-metadata-0.hf3fs-metadata-members.ns.svc.cluster.local:18000",
      "https://hf3fs-metadata-1.hf3fs-metadata-members.ns.svc.cluster.local:18000",
    ]);
  });
});

describe.skipIf(missing !== "")("a relay whose upstream is an SRV name", () => {
  it("holds calls while the name names no member, then relays to the members it names, and follows their leader through a failover", async () => {
    const etcd = await startEtcdCluster(1);
    const servers = await Promise.all([0, 1, 2].map(() => startServer(etcd)));
    const first = await waitForLeader(servers);
    // The DNS a starting pod meets: the members' names are not there yet.
    let records: { target: string; port: number }[] = [];
    const dns = await srvServer(() => records);
    const resolver = new Resolver();
    resolver.setServers([dns.address]);
    const relay = await startTestRelay("srv+http://_grpc._tcp.members.test", { resolveSrv: (name) => resolver.resolveSrv(name), holdMs: 10_000 });
    const client = createMetadataClient({ baseUrl: relay.url, retry: { deadlineMs: 0 } });
    const initialized = client.initializeRank({ namespace: "srv", rank: 0, numPages: 8, worldSize: 1 });
    records = servers.map((s) => ({ target: "127.0.0.1", port: Number(new URL(s.url).port) }));
    expect(await initialized).toMatchObject({ created: true }); // held until the name named the members (read every 2 s)
    await kill9(first);
    await waitForLeader(servers);
    const { pages } = await client.batchAllocate({ namespace: "srv", rank: 0, keys: ["a"] });
    await client.confirmWrite({ namespace: "srv", rank: 0, keys: ["a"], pages });
    expect((await client.batchExists({ namespace: "srv", keys: ["a"] })).exists).toEqual([true]);
    dns.close();
  }, 60_000);
});
