import type { Change } from "./change.js";
import { Journal } from "./journal.js";
import type { Namespace } from "./namespace.js";

/**
 * stateRecords lists a state as the records a store kept from its journal
 * holds for it (one per rank, confirmed key, reservation and draining
 * page), each as the change that restores it, ranks first (restore's
 * order): what a store written whole from the state must hold. The
 * journal's own methods make them, so a record is the same whichever way
 * it came.
 */
export function stateRecords(namespaces: Iterable<Namespace>): Change[] {
  const ranks = new Journal(true);
  const rest = new Journal(true);
  for (const ns of namespaces) {
    for (const rank of ns.ranks.values()) {
      ranks.rank(ns, rank.rank, rank.numPages);
      for (const page of rank.reservations) rest.reserve(ns, rank, rank.reservedBy(page), page);
      for (const [page, { key, untilMs }] of rank.draining) rest.record({ kind: "drain", namespace: ns.name, rank: rank.rank, page, key, untilMs });
    }
    for (const entry of ns.keys.live()) if (ns.columns.confirmed[entry]! > 0) rest.key(ns, entry);
  }
  return [...ranks.take(), ...rest.take()];
}
