import { afterEach } from "vitest";
import { type EtcdCluster, type EtcdTiming, type EtcdTls, running, startEtcdCluster as start } from "../../bench/harness/etcd-process.js";
import { tempDir } from "./temp-dir.js";

export { type EtcdCluster, type EtcdMember, type EtcdTls, etcdFollower, etcdLeaderIndex, etcdStatus, freePort } from "../../bench/harness/etcd-process.js";

afterEach(() => {
  for (const child of running) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  running.clear();
});

/** startEtcdCluster starts `size` etcd members on loopback for one test (serving clients over TLS with `tls`; `timing`, if given, instead of 50 and 500 ms): their data dirs are removed and they are killed after it. */
export function startEtcdCluster(size: number, tls?: EtcdTls, timing?: EtcdTiming): Promise<EtcdCluster> {
  return start(size, tempDir(), tls, timing);
}
