import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Etcd3 } from "etcd3";
import { describe, expect, it } from "vitest";
import { AllocationStatus } from "../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { createMetadataClient } from "../../src/client/index.js";
import { makeCertificates } from "../support/certificates.js";
import { startChildServer } from "../support/child-server.js";
import { lacking } from "../support/debian-packages.js";
import { type EtcdCluster, freePort, startEtcdCluster } from "../support/etcd-cluster.js";
import { startServer, waitForLeader } from "../support/ha-cluster.js";
import { untilLocal } from "../support/standby-counts.js";
import { tempDir } from "../support/temp-dir.js";

const missing = lacking("the etcd TLS and auth tests", "etcd", "openssl");

/** enableAuth turns etcd's auth on with a root user (etcd requires one, in the root role) whose password is `password`. */
async function enableAuth(etcd: EtcdCluster, certificates: { ca: string; clientCert: string; clientKey: string }, password: string): Promise<void> {
  const admin = new Etcd3({
    hosts: etcd.endpoints,
    credentials: {
      rootCertificate: readFileSync(certificates.ca),
      certChain: readFileSync(certificates.clientCert),
      privateKey: readFileSync(certificates.clientKey),
    },
  });
  try {
    await admin.role("root").create();
    await admin.user("root").create(password);
    await admin.user("root").addRole("root");
    await admin.auth.authEnable();
  } finally {
    admin.close();
  }
}

/** cannotStart runs a member that must fail to join, and returns its exit code and log. */
async function cannotStart(args: string[]): Promise<{ code: number | null; log: string }> {
  const server = await startChildServer(["--port", String(await freePort()), ...args]);
  let log = "";
  server.child.stdout!.on("data", (d) => (log += d));
  server.child.stderr!.on("data", (d) => (log += d));
  return { code: await server.exited, log };
}

describe.skipIf(missing !== "")("a member's link to etcd: TLS, client certificates and etcd's auth", () => {
  it("leads and serves over TLS with its client certificate and etcd user; without the certificate, or with a wrong password, it exits 1 naming etcd", async () => {
    const dir = tempDir();
    const certificates = makeCertificates(dir);
    const etcd = await startEtcdCluster(1, {
      cert: certificates.serverCert,
      key: certificates.serverKey,
      ca: certificates.ca,
      clientCert: certificates.clientCert,
      clientKey: certificates.clientKey,
    });
    expect(etcd.endpoints).toMatch(/^https:\/\//);
    await enableAuth(etcd, certificates, "the root password");
    const passwordFile = join(dir, "etcd-password");
    writeFileSync(passwordFile, "the root password\n");
    const wrongPasswordFile = join(dir, "wrong-password");
    writeFileSync(wrongPasswordFile, "not it\n");
    const tls = ["--etcd-ca", certificates.ca, "--etcd-cert", certificates.clientCert, "--etcd-key", certificates.clientKey];

    const member = [...tls, "--etcd-user", "root", "--etcd-password-file", passwordFile, "--standby-read-lag", "1s"];
    const server = await startServer(etcd, tempDir(), member);
    expect(await waitForLeader([server])).toBe(server);
    const client = createMetadataClient({ baseUrl: server.url });
    await client.initializeRank({ rank: 0, numPages: 4, worldSize: 1 });
    expect((await client.batchAllocate({ rank: 0, keys: ["k"] })).statuses).toEqual([AllocationStatus.NEW]);
    // A standby learns it holds the log's end through the same TLS and user (its question on the lean client), and answers reads.
    const standby = await startServer(etcd, tempDir(), member);
    await untilLocal(standby, "");

    // etcd refuses a member without a client certificate (its --client-cert-auth), and one with a wrong password.
    const common = ["--data-dir", tempDir(), "--etcd-endpoints", etcd.endpoints];
    const noCertificate = await cannotStart([...common, "--etcd-ca", certificates.ca, "--etcd-user", "root", "--etcd-password-file", passwordFile]);
    expect(noCertificate.code).toBe(1);
    expect(noCertificate.log).toMatch(/cannot reach etcd.*UNAVAILABLE/);
    const wrongPassword = await cannotStart([...common, ...tls, "--etcd-user", "root", "--etcd-password-file", wrongPasswordFile]);
    expect(wrongPassword.code).toBe(1);
    expect(wrongPassword.log).toMatch(/authentication failed/);
    // A member without etcd's user cannot join either once auth is on.
    const noUser = await cannotStart([...common, ...tls]);
    expect(noUser.code).toBe(1);
    expect(noUser.log).toMatch(/PERMISSION_DENIED/);
  }, 90_000);
});
