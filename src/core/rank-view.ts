import { invalidArgument } from "./errors.js";
import { KeyScope } from "./key-scope.js";
import type { MetadataState } from "./state.js";
import type { StateReads } from "./state-reads.js";

/**
 * RankView is how a BatchExists, DeleteKeys or Clear names a rank: `rank`,
 * the rank it asks about or acts on, or `callerRank`, the rank making the
 * call (SGLang's per-rank view, where every call comes from a rank that
 * must be initialized). At most one of them.
 */
export interface RankView {
  readonly rank?: number;
  readonly callerRank?: number;
}

/** askedRank is the rank a BatchExists asks about: `rank`, or `callerRank` once it is found initialized (RANK_NOT_INITIALIZED otherwise). */
export function askedRank(state: Pick<StateReads, "checkRank">, namespace: string, view: RankView): number | undefined {
  if (view.callerRank === undefined) return view.rank;
  checkOne(view);
  state.checkRank(namespace, view.callerRank);
  return view.callerRank;
}

/**
 * actedRank is the rank a DeleteKeys or Clear acts on: `rank`, or for
 * `callerRank` (found initialized) that rank in a namespace of
 * KEY_SCOPE_RANK and none, the whole namespace, in one of KEY_SCOPE_NAMESPACE.
 */
export function actedRank(state: MetadataState, namespace: string, view: RankView): number | undefined {
  if (view.callerRank === undefined) return view.rank;
  checkOne(view);
  state.checkRank(namespace, view.callerRank);
  return state.keyScopeOf(namespace) === KeyScope.RANK ? view.callerRank : undefined;
}

/** checkOne refuses a call that names both rank and caller_rank. */
function checkOne(view: RankView): void {
  if (view.rank !== undefined) throw invalidArgument("caller_rank", "a call takes rank or caller_rank, not both");
}
