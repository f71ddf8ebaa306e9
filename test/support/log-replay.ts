import { Etcd3 } from "etcd3";
import { type Change, ReplayState, systemClock } from "../../src/core/index.js";
import { ClusterKeys } from "../../src/replication/cluster-keys.js";
import { decodePart, GroupAssembler } from "../../src/replication/log-codec.js";
import type { EtcdCluster } from "./etcd-cluster.js";

/** Group is one group commit of a cluster's log: its changes and the sequence number of its last entry (the position a member that applied it reports). */
export interface Group {
  readonly position: number;
  readonly changes: Change[];
}

/** readLog reads a cluster's whole log from etcd, as groups in order; it throws when its start was compacted away (the checker needs it all). */
export async function readLog(etcd: EtcdCluster, clusterName = "default"): Promise<Group[]> {
  const keys = new ClusterKeys(clusterName);
  const client = new Etcd3({ hosts: etcd.endpoints.split(",") });
  try {
    const res = await client.kv.range({ key: keys.log, range_end: keys.logEnd });
    const assembler = new GroupAssembler();
    const groups: Group[] = [];
    let expected = 1;
    for (const kv of res.kvs) {
      const seq = keys.seqOf(kv.key);
      if (seq !== expected) throw new Error(`the log lacks entry ${expected} (next held: ${seq}): it was compacted`);
      expected = seq + 1;
      const changes = assembler.add(seq, decodePart(kv.value));
      if (changes !== undefined) groups.push({ position: seq, changes });
    }
    return groups;
  } finally {
    client.close();
  }
}

/**
 * existsAtPositions replays the log's groups into a fresh state and tells,
 * at each group's position (and at 0, before any), whether each key exists
 * in the namespace as BatchExists answers it.
 */
export function existsAtPositions(groups: readonly Group[], namespace: string, keys: readonly string[]): Map<number, boolean[]> {
  const state = new ReplayState(systemClock, {}, false);
  const at = new Map<number, boolean[]>([[0, keys.map(() => false)]]);
  for (const group of groups) {
    for (const change of group.changes) state.apply(change);
    const initialized = state.reads.stats(undefined).some((view) => view.namespace === namespace);
    at.set(group.position, initialized ? state.reads.batchExists(namespace, [...keys]) : keys.map(() => false));
  }
  return at;
}
