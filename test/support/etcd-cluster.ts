import { afterEach } from "vitest";
import { type EtcdCluster, running, startEtcdCluster as start } from "./etcd-process.js";
import { tempDir } from "./temp-dir.js";

export { type EtcdCluster, type EtcdMember, etcdMissing, freePort } from "./etcd-process.js";

afterEach(() => {
  for (const child of running) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  running.clear();
});

/** startEtcdCluster starts `size` etcd members on loopback for one test: their data dirs are removed and they are killed after it. */
export function startEtcdCluster(size: number): Promise<EtcdCluster> {
  return start(size, tempDir());
}
