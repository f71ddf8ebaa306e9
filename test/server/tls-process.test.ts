import { execFile, execFileSync } from "node:child_process";
import { copyFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { makeCertificates } from "../support/certificates.js";
import { runCli, startChildServer } from "../support/child-server.js";
import { lacking } from "../support/debian-packages.js";
import { tempDir } from "../support/temp-dir.js";

const ROOT = new URL("../..", import.meta.url).pathname;
// Certificates come from openssl; the Python worker needs grpcio and protoc, as test/examples/python-worker.test.ts.
const missing = lacking("the TLS process tests", "openssl", "protoc", "grpcio");

describe.skipIf(missing !== "")("serve with --tls-cert, --tls-key and --tls-client-ca", () => {
  it("lets in the CLI and the Python worker with a client certificate, and re-reads its certificates on SIGHUP", async () => {
    const dir = tempDir();
    const certs = makeCertificates(dir);
    const cert = join(dir, "live.crt");
    const key = join(dir, "live.key");
    copyFileSync(certs.serverCert, cert);
    copyFileSync(certs.serverKey, key);
    const server = await startChildServer(["--in-memory", "--tls-cert", cert, "--tls-key", key, "--tls-client-ca", certs.ca]);
    expect(server.url).toMatch(/^https:/);
    const mtls = ["--ca-file", certs.ca, "--cert-file", certs.clientCert, "--key-file", certs.clientKey];
    expect((await runCli(["health", "--server", server.url, ...mtls])).stdout.trim()).toBe("SERVING");
    expect((await runCli(["health", "--server", server.url, "--ca-file", certs.ca])).code).toBe(1);

    execFileSync("bash", [`${ROOT}examples/python/generate.sh`]);
    const python = await promisify(execFile)(
      "/usr/bin/python3",
      [`${ROOT}examples/python/worker.py`, "--server", server.url.replace("https://", ""), ...mtls],
      { encoding: "utf8", timeout: 30_000 },
    ).catch((e: { stdout?: string; stderr?: string }) => ({ stdout: e.stdout ?? "", stderr: e.stderr ?? String(e) }));
    expect(python.stdout).toContain("initialized rank 0: created=True");

    // A certificate from another CA in place of the live one, then SIGHUP: new connections get it.
    const other = makeCertificates(tempDir());
    copyFileSync(other.serverCert, cert);
    copyFileSync(other.serverKey, key);
    server.child.kill("SIGHUP");
    for (let i = 0; i < 100 && !server.lines.some((l) => l.includes("TLS certificates reloaded")); i++) await new Promise((r) => setTimeout(r, 20));
    expect((await runCli(["health", "--server", server.url, ...mtls])).code).toBe(1);
    const otherCa = ["--ca-file", other.ca, "--cert-file", certs.clientCert, "--key-file", certs.clientKey];
    expect((await runCli(["health", "--server", server.url, ...otherCa])).stdout.trim()).toBe("SERVING");
    server.child.kill("SIGTERM");
    expect(await server.exited).toBe(0);
  });
});
