import { execFile, execFileSync, spawn } from "node:child_process";
import { once } from "node:events";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { AccessPolicy } from "../../src/service/access-policy.js";
import { makeCertificates } from "../support/certificates.js";
import { lacking } from "../support/debian-packages.js";
import { stallableLeader } from "../support/stallable-leader.js";
import { tempDir } from "../support/temp-dir.js";
import { freePort, startTestServer } from "../support/test-server.js";
import { until } from "../support/until.js";

const ROOT = new URL("../..", import.meta.url).pathname;
const PYTHON = "/usr/bin/python3";
const missing = lacking("the Python worker test", "grpcio", "protoc");

describe.skipIf(missing !== "")("the Python worker example (grpcio)", () => {
  it("runs the full cycle and reads FAILED_PRECONDITION with its ErrorInfo", async () => {
    execFileSync("bash", [`${ROOT}examples/python/generate.sh`]);
    const server = await startTestServer();
    const target = server.url.replace("http://", "");
    // Asynchronously: the server runs in this process and must keep answering.
    const run = await promisify(execFile)(PYTHON, [`${ROOT}examples/python/worker.py`, "--server", target], { encoding: "utf8", timeout: 30_000 });
    expect(run.stderr).toBe("");
    const lines = run.stdout.trim().split("\n");
    expect(lines[0]).toBe(`initialized rank 0: created=True free_pages=1024 server_id=${server.store.serverId}`);
    expect(lines[1]).toBe("allocated 4 keys: pages [0, 1, 2, 3]");
    expect(lines[2]).toBe("confirmed 4 keys, 4 complete");
    expect(lines[3]).toBe("exists [True, True, True, True, False]");
    expect(lines[4]).toBe("locations [0, 1, 2, 3]");
    expect(lines[5]).toMatch(/^error FAILED_PRECONDITION REASON_RESERVATION_NOT_FOUND key=[0-9a-f]{64}-never-reserved page=4 rank=0$/);
    expect(server.state.batchExists("python-worker", ["x"])).toEqual([false]);
  });

  it("sends its token to a server that needs one", async () => {
    execFileSync("bash", [`${ROOT}examples/python/generate.sh`]);
    const dir = tempDir();
    const tokens = join(dir, "tokens");
    writeFileSync(tokens, "python-token\n");
    const server = await startTestServer({}, undefined, 0, { access: new AccessPolicy({ workerTokenFile: tokens }) });
    const target = server.url.replace("http://", "");
    const worker = (args: string[]) =>
      promisify(execFile)(PYTHON, [`${ROOT}examples/python/worker.py`, "--server", target, ...args], { encoding: "utf8", timeout: 30_000 });
    await expect(worker([])).rejects.toThrow(/UNAUTHENTICATED REASON_UNAUTHENTICATED/);
    expect((await worker(["--token-file", tokens])).stdout).toContain("initialized rank 0: created=True");
  });
});

describe.skipIf(missing !== "")("the Python example where no server answers", () => {
  it("says within seconds that it is retrying, then fails in one line naming the likely cause, without a traceback", async () => {
    const port = await freePort();
    const run = await promisify(execFile)(PYTHON, [`${ROOT}examples/python/worker.py`, "--server", `127.0.0.1:${port}`, "--retry-seconds", "4"], {
      encoding: "utf8",
      timeout: 30_000,
    }).catch((error: { code: number; stderr: string }) => error);
    expect((run as { code: number }).code).toBe(1);
    const stderr = (run as { stderr: string }).stderr;
    expect(stderr).toMatch(/unavailable .*nothing listens there.*; retrying for up to 4 s/);
    expect(stderr).toMatch(/^worker\.py: UNAVAILABLE .* unavailable after 4 s of retries: .*nothing listens there/m);
    expect(stderr).not.toContain("Traceback");
  }, 30_000);

  it.skipIf(lacking("the Python worker's TLS test", "openssl") !== "")(
    "says the port speaks TLS when given no CA for a TLS port",
    async () => {
      execFileSync("bash", [`${ROOT}examples/python/generate.sh`]);
      const certs = makeCertificates(tempDir());
      const tls = { cert: readFileSync(certs.serverCert), key: readFileSync(certs.serverKey) };
      const server = await startTestServer({}, undefined, 0, { tls });
      const run = await promisify(execFile)(
        PYTHON,
        [`${ROOT}examples/python/worker.py`, "--server", server.url.replace("https://", ""), "--retry-seconds", "3"],
        {
          encoding: "utf8",
          timeout: 30_000,
        },
      ).catch((error: { code: number; stderr: string }) => error);
      expect((run as { code: number }).code).toBe(1);
      const stderr = (run as { stderr: string }).stderr;
      expect(stderr).toMatch(/unavailable \(this port speaks TLS only: use https:\/\/ .*\); retrying for up to 3 s/);
      expect(stderr).toMatch(
        /^worker\.py: UNAVAILABLE .* unavailable after 3 s of retries: this port speaks TLS only.*; pass root_certificates= \(worker\.py: --ca-file\)$/m,
      );
      expect(stderr).not.toContain("Traceback");
    },
    30_000,
  );
});

/** HELD_CALL initializes a rank, says so, waits for a line on stdin, then asks BatchExists and prints the answer (or the error). */
const HELD_CALL = `
import sys
sys.path.insert(0, sys.argv[1])
from hf3fs_metadata_client import MetadataClient, MetadataError
client = MetadataClient(sys.argv[2])
client.initialize_rank(0, 8)
print("initialized", flush=True)
sys.stdin.readline()
try:
    print("exists", list(client.batch_exists(["k"]).exists), flush=True)
except MetadataError as error:
    print("error", error.code.name, flush=True)
`;

describe.skipIf(missing !== "")("the Python example given a cluster's members, whose leader stalls with a call on it", () => {
  it("closes the stalled connection once its keepalive PING goes unanswered, and sends the call to the next leader within its timeout", async () => {
    execFileSync("bash", [`${ROOT}examples/python/generate.sh`]);
    const { standby: b, proxy, heldThroughTakeOver } = await stallableLeader();
    const targets = [proxy.url, b.url].map((url) => url.replace("http://", "")).join(",");
    const child = spawn(PYTHON, ["-c", HELD_CALL, `${ROOT}examples/python`, targets], { stdio: ["pipe", "pipe", "inherit"] });
    let stdout = "";
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
    const exited = once(child, "exit");
    await until(() => stdout.includes("initialized\n"));

    await heldThroughTakeOver(async () => {
      child.stdin.write("go\n");
      await exited;
    });
    expect(stdout).toBe("initialized\nexists [False]\n"); // answered by b within the call's 10 s: a, stalled, answers nothing
  }, 30_000);
});
