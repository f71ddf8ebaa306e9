import { writeFileSync } from "node:fs";
import * as http from "node:http";
import * as http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterEach, describe, expect, it } from "vitest";
import { MetadataService } from "../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { LeaderForward } from "../../src/server/leader-forward.js";
import { AccessPolicy } from "../../src/service/access-policy.js";
import { Leadership } from "../../src/service/leadership.js";
import { stallableLeader } from "../support/stallable-leader.js";
import { tempDir } from "../support/temp-dir.js";
import { freePort, startTestServer, type TestServerConfig } from "../support/test-server.js";
import { until } from "../support/until.js";

const LIMITS = { maxBufferedBytes: 1 << 20, maxBufferedBytesPerConnection: 1 << 20, requestTimeoutMs: 60_000 };
const closing: (() => void)[] = [];
afterEach(() => {
  for (const close of closing.splice(0)) close();
});

/** leader starts an HTTP/2 server (on `port`, else any) that answers each call with `answer` (given the call's number from 0), and returns its URL. */
async function leader(answer: (call: number, stream: http2.ServerHttp2Stream, body: string) => void, port = 0): Promise<string> {
  let calls = 0;
  const server = http2.createServer();
  server.on("stream", (stream) => {
    stream.on("error", () => undefined); // a stream the test breaks on purpose
    const chunks: Buffer[] = [];
    stream.on("data", (chunk: Buffer) => chunks.push(chunk));
    stream.on("end", () => answer(calls++, stream, Buffer.concat(chunks).toString()));
  });
  await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve));
  closing.push(() => server.close());
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** standby starts an HTTP/1.1 server that forwards every call to the leader its Leadership names, and returns its URL. */
async function standby(leaderUrl: string, holdMs = 2_000): Promise<string> {
  const leadership = new Leadership();
  leadership.follow(leaderUrl, true);
  const forward = new LeaderForward(
    leadership,
    holdMs,
    1 << 16,
    LIMITS,
    (req) => req.url ?? "/",
    () => true,
    () => false,
    () => false,
  );
  const server = http.createServer((req, res) => {
    expect(forward.takes(req)).toBe(true);
    void forward.forward(req, res, () => res.writeHead(500).end("answered here"));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  closing.push(() => {
    forward.close();
    server.close();
  });
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

const post = (url: string, body: string) => fetch(`${url}/keys/batch_exists`, { method: "POST", body }).then(async (r) => [r.status, await r.text()]);

describe("a standby's forwarding of calls (LeaderForward)", () => {
  it("passes a call to the leader and its answer back, status, headers and body", async () => {
    const url = await standby(
      await leader((_, stream, body) => {
        stream.respond({ ":status": 200, "x-answer": "yes" });
        stream.end(`echo ${body}`);
      }),
    );
    const res = await fetch(`${url}/keys/batch_exists`, { method: "POST", body: "k" });
    expect([res.status, res.headers.get("x-answer"), await res.text()]).toEqual([200, "yes", "echo k"]);
  });

  it("sends a call again, with its body, when the leader's connection broke before any answer", async () => {
    const url = await standby(
      await leader((call, stream, body) => {
        if (call === 0) return void stream.session?.destroy(); // as a leader killed under the call
        stream.respond({ ":status": 200 });
        stream.end(`second try: ${body}`);
      }),
    );
    expect(await post(url, "the body")).toEqual([200, "second try: the body"]);
  });

  it("fails the call, and only it, when the leader breaks off an answer it began", async () => {
    const url = await standby(
      await leader((_, stream) => {
        stream.respond({ ":status": 200 });
        stream.write("half an answ");
        setTimeout(() => stream.session?.destroy(), 20); // as a leader killed mid-answer
      }),
    );
    await expect(post(url, "k")).rejects.toThrow();
    // The standby goes on serving: the next call is forwarded too (and broken off by this leader the same way).
    await expect(post(url, "k")).rejects.toThrow();
  });

  it("sends a held call to a leader that comes back at the address it could not reach (restarted by its supervisor), not only to another", async () => {
    const port = await freePort();
    const url = await standby(`http://127.0.0.1:${port}`, 10_000);
    const answered = post(url, "held");
    // The leader is down for a while (the standby tries, fails, and holds the call), then back at the same address.
    await new Promise((resolve) => setTimeout(resolve, 600));
    await leader((_, stream, body) => {
      stream.respond({ ":status": 200 });
      stream.end(`back: ${body}`);
    }, port);
    // Answered by it: held for a leader at another address, the call would have run out its hold and failed (503).
    expect(await answered).toEqual([200, "back: held"]);
  });

  it("answers UNAVAILABLE in the call's framing when no leader can be reached within the hold", async () => {
    const url = await standby(`http://127.0.0.1:${await freePort()}`, 300);
    const [status, body] = await post(url, "k");
    expect(status).toBe(503);
    expect(JSON.parse(body as string)).toMatchObject({ code: "unavailable", reason: "REASON_NOT_LEADER" });
  });

  it("sends the call again to the next leader it names, once the stalled one's connection leaves the held call's PING unanswered", async () => {
    // a leads behind a proxy that can stall it, c is a standby that refuses calls, s one that forwards them.
    const { standby: c, proxy, heldThroughTakeOver } = await stallableLeader();
    const standby = new Leadership();
    const s = await startTestServer({}, undefined, 0, { leadership: standby, standbyCalls: "forward" });
    standby.follow(proxy.url, true);
    const client = createClient(MetadataService, createGrpcTransport({ baseUrl: s.url }));
    await client.initializeRank({ rank: 0, numPages: 8 }); // forwarded to a: the standby's connection to it is open

    // The call held on a, s PINGs their connection (HeldCalls); then c leads (a's lease lapsed), and s reads so; a still stalled.
    let pings = 0;
    const { answer, ms } = await heldThroughTakeOver(() => client.batchExists({ keys: ["k"] }), {
      before: () => until(() => proxy.pingsHeld() > 0),
      told: () => {
        pings = proxy.pingsHeld();
        standby.follow(c.url, true);
      },
    });
    expect(answer.exists).toEqual([false]); // answered by c: a, stalled, answers nothing
    // The check as s named c joined the PING on its way: it sent none of its own, and waited only what was left of LEFT_PING_MS.
    expect(proxy.pingsHeld()).toBe(pings);
    console.log(`the forwarded call was answered ${ms} ms after the standby named the next leader`);
  }, 30_000);
});

describe("a standby that forwards, before it forwards anything", () => {
  /** pair starts a leader and a standby forwarding to it, both taking the worker token in `dir`. */
  async function pair(config: TestServerConfig = {}) {
    const dir = tempDir();
    writeFileSync(join(dir, "tokens"), "worker-secret\n");
    const access = new AccessPolicy({ workerTokenFile: join(dir, "tokens") });
    const leader = await startTestServer({}, undefined, 0, { access });
    const leadership = new Leadership();
    leadership.follow(leader.url, true);
    const standby = await startTestServer({}, undefined, 0, { access, leadership, standbyCalls: "forward", ...config });
    return { leader, standby };
  }

  /** call sends a vLLM batch_exists over HTTP/1.1 with `headers`, its body written (and ended unless `open`), and resolves with the status. */
  function call(url: string, headers: http.OutgoingHttpHeaders, open = false): Promise<number> {
    const body = JSON.stringify({ keys: ["k"] });
    const req = http.request(`${url}/keys/batch_exists`, { method: "POST", headers: { "content-type": "application/json", ...headers } });
    const status = new Promise<number>((resolve, reject) => {
      req.on("response", (res) => {
        res.resume();
        resolve(res.statusCode!);
      });
      req.on("error", reject);
    });
    if (open) req.write(body.slice(0, 3));
    else req.end(body);
    closing.push(() => req.destroy());
    return status;
  }

  it("checks the caller's token: a call without one, TE: gzip or not, is refused at once, not held or passed on", async () => {
    const { standby } = await pair();
    expect(await call(standby.url, {})).toBe(401);
    expect(await call(standby.url, { te: "gzip" })).toBe(401);
    expect(await call(standby.url, { te: "gzip" }, true)).toBe(401); // its body not even sent: nothing of it is buffered
  });

  it("passes on a call with TE: gzip (HTTP/2 carries only te: trailers), and the calls that share its connection to the leader", async () => {
    const { standby } = await pair();
    const auth = { authorization: "Bearer worker-secret" };
    const answers = await Promise.all([call(standby.url, { ...auth, te: "gzip" }), call(standby.url, auth), call(standby.url, { ...auth, te: "gzip" })]);
    expect(answers).toEqual([200, 200, 200]);
  });

  it("cuts a body that does not arrive within --request-timeout, as the edge does", async () => {
    const { standby } = await pair({ requestTimeoutMs: 300 });
    expect(await call(standby.url, { authorization: "Bearer worker-secret" }, true)).toBe(503);
  });
});
