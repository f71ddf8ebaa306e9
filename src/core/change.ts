/**
 * Change is one durable effect of a state operation. Operations append their
 * changes in the order they apply them; a store that makes every change
 * durable before the reply, and hands them back to MetadataState.restore in
 * any order after a restart, rebuilds the same pages and keys.
 *
 * The page changes say the page's state after the change; `free` means the
 * page holds nothing. `complete` and `forget` track the completeness of a
 * key, which cannot be derived again when world_size is unknown.
 */
export type Change =
  | { kind: "rank"; namespace: string; rank: number; numPages: number; worldSize: number }
  | { kind: "reserve"; namespace: string; rank: number; page: number; key: string; expiresAtMs: number }
  | { kind: "use"; namespace: string; rank: number; page: number; key: string }
  | { kind: "drain"; namespace: string; rank: number; page: number; key: string; untilMs: number }
  | { kind: "free"; namespace: string; rank: number; page: number }
  | { kind: "complete"; namespace: string; key: string }
  | { kind: "forget"; namespace: string; key: string };
