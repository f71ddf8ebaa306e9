/**
 * ParentName is how a change names a key's parent (its prefix key,
 * KeyTree): the parent's key; "" for a root; null when the parent is gone,
 * so the key is an orphan.
 */
export type ParentName = string | null;

/**
 * Change is one durable effect of a state operation. Operations append their
 * changes in the order they apply them; a store that makes every change
 * durable before the reply, and hands the surviving ones back to
 * MetadataState.restore after a restart, rebuilds the same pages and keys.
 *
 * - rank: a rank was created, or resized (the same rank again, its new
 *   numPages), with its namespace's world size and layout (absent: none).
 * - unrank: a rank of a namespace of several was dropped: the changes
 *   before it (unreserve, undrain) ended its reservations and draining
 *   pages; it takes every key's page there (a key left with none is
 *   forgotten) and then completes the keys confirmed on the required ranks
 *   left (rank-removal.ts). One change however many keys the rank held;
 *   the records of keys it orphans follow it. (A log of an earlier version
 *   emptied the rank by a change per key before it: the same effect.)
 * - reserve / unreserve: a reservation began (or was renewed) / ended
 *   (confirmed, released, expired or cleared); `confirmed` says the key's
 *   record follows, so a replay keeps the key meanwhile.
 * - key: a key's confirmed pages, as [rank, page, rank, page, ...], and its
 *   completeness, after a confirmation: the whole record, so a store keeps
 *   one record per key. It names the key's parent (ParentName), as a
 *   reservation does, so that a restart rebuilds the prefix tree.
 * - forget: a key was dropped (deleted, evicted, reclaimed, cleared).
 * - drain / undrain: a dropped key's page is held until its read lease ends /
 *   was freed.
 * - drop: a namespace was forgotten whole, its ranks, keys, reservations
 *   and draining pages with it (a reset, a Clear, the drop of its last
 *   rank): one change however large the namespace, so that forgetting it
 *   costs the journal, the log and the store one record, not one per key.
 */
export type Change =
  | { kind: "rank"; namespace: string; rank: number; numPages: number; worldSize: number; layout?: string }
  | { kind: "unrank"; namespace: string; rank: number }
  | { kind: "reserve"; namespace: string; rank: number; page: number; key: string; parent: ParentName; expiresAtMs: number }
  | { kind: "unreserve"; namespace: string; rank: number; page: number; confirmed?: true }
  | { kind: "key"; namespace: string; key: string; parent: ParentName; complete: boolean; pages: number[] }
  | { kind: "forget"; namespace: string; key: string }
  | { kind: "drain"; namespace: string; rank: number; page: number; key: string; untilMs: number }
  | { kind: "undrain"; namespace: string; rank: number; page: number }
  | { kind: "drop"; namespace: string };
