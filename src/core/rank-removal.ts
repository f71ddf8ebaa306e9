import type { Namespace } from "./namespace.js";
import type { Rank } from "./rank.js";
import type { Registry } from "./registry.js";

/**
 * removeRank applies an "unrank" change (Change): every key loses its page
 * on the rank, a key left with none is forgotten, the rank goes, and the
 * keys then confirmed on the required ranks become complete. The changes
 * before it ended the rank's reservations and draining pages. Its time
 * grows with the namespace's keys in memory only: it journals nothing but
 * the records of the keys it orphans (Journal.orphan), written last, as they
 * end. Returns how many keys lost their last page.
 */
export function removeRank(registry: Registry, ns: Namespace, rank: Rank, nowMs: number): number {
  const gone: number[] = [];
  for (const entry of ns.keys.live()) {
    const page = rank.confirmedPage(entry);
    if (page < 0) continue;
    if (ns.columns.confirmed[entry] === 1) gone.push(entry);
    else rank.dropConfirmed(entry, page, undefined);
  }
  // The keys go last, once every page and completeness is final: forgetting one journals its children as they end.
  for (const entry of gone) {
    registry.unconfirm(ns, entry);
    ns.endLease(entry);
  }
  ns.removeRank(rank.rank);
  ns.completeReady(nowMs, () => {});
  for (const entry of gone) ns.forgetIfEmpty(entry);
  return gone.length;
}
