import type { Keys } from "./key-list.js";
import type { Registry } from "./registry.js";
import type { StateOptions } from "./state-options.js";
import { type NamespaceStatsView, statsOf, statsPage } from "./stats-views.js";
import { checkUint32, keysCall, namespaceName } from "./validate.js";

/**
 * StateReads are the calls that only read a state: what a leader answers
 * from its MetadataState, and a caught-up standby from the state it
 * replays (ReplayState.reads), which must not change it.
 */
export interface StateReads {
  readonly options: StateOptions;
  batchExists(namespace: string, keyBatch: Keys, rankNo?: number): boolean[];
  checkRank(namespace: string, rankNo: number): void;
  stats(namespace: string | undefined): NamespaceStatsView[];
  statsPage(after: string, size: number): { views: NamespaceStatsView[]; next: string };
}

/**
 * keysExist tells, per key, whether it is complete in the namespace (with
 * KEY_SCOPE_RANK: held by every rank), or with a rank, whether it is
 * confirmed on that rank, as the registry stands: it processes no
 * deadline. With callAtMs it records the call in the namespace (a worker's
 * or a scheduler's call keeps it in use, resetNamespace); a replica's
 * read records nothing.
 */
export function keysExist(registry: Registry, namespace: string, keyBatch: Keys, rankNo: number | undefined, callAtMs?: number): boolean[] {
  const { name, keys } = keysCall(namespace, keyBatch, registry.options);
  if (rankNo !== undefined) checkUint32(rankNo, "rank");
  const exists = new Array<boolean>(keys.length).fill(false);
  if (rankNo !== undefined) {
    const at = registry.find(name, rankNo);
    if (at === undefined) return exists;
    if (callAtMs !== undefined) at.ns.lastCallMs = callAtMs;
    const found = at.ns.findAll(keys);
    for (let i = 0; i < keys.length; i++) exists[i] = found[i]! >= 0 && at.rank.confirmedPage(found[i]!) >= 0;
    return exists;
  }
  const parts = registry.parts(name);
  for (let p = 0; p < parts.length; p++) {
    const ns = parts[p]!;
    if (callAtMs !== undefined) ns.lastCallMs = callAtMs;
    const found = ns.findAll(keys);
    for (let i = 0; i < keys.length; i++) exists[i] = (p === 0 || exists[i]!) && found[i]! >= 0 && ns.isComplete(found[i]!);
  }
  return exists;
}

/** peekReads are the reads of a registry that another state keeps (a standby's replay): nothing processed, nothing recorded. */
export function peekReads(registry: () => Registry): StateReads {
  return {
    get options() {
      return registry().options;
    },
    batchExists: (namespace, keyBatch, rankNo) => keysExist(registry(), namespace, keyBatch, rankNo),
    checkRank: (namespace, rankNo) => void registry().rankOf(namespaceName(namespace, registry().options), rankNo),
    stats: (namespace) => statsIn(registry(), namespace),
    statsPage: (after, size) => statsPage(registry(), after, size),
  };
}

/** statsIn counts pages and keys of a namespace, or of all namespaces when namespace is undefined, as the registry stands. */
export function statsIn(registry: Registry, namespace: string | undefined): NamespaceStatsView[] {
  if (namespace === undefined) return statsPage(registry, "", Number.POSITIVE_INFINITY).views;
  const parts = registry.parts(namespaceName(namespace, registry.options));
  return parts.length === 0 ? [] : [statsOf(parts)];
}
