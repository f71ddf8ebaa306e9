import { MetadataError, Reason } from "../core/index.js";
import type { Logger } from "./logger.js";

/** EVERY_MS is how often the same namespace and rank may be logged: once a minute. */
const EVERY_MS = 60_000;
/** MAX_SUBJECTS bounds the namespaces and ranks remembered, so that callers naming new ones cannot grow the map without end. */
const MAX_SUBJECTS = 10_000;

/**
 * RefusalLog logs at warn the refusals an engine's client does not show
 * (vLLM's prints only `409 Client Error: Conflict`): a refused
 * InitializeRank, and a call on a rank not initialized, with the detail
 * its answer carried, once per namespace and rank per minute.
 */
export class RefusalLog {
  private readonly last = new Map<string, number>();

  constructor(
    private readonly logger: Logger,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** note hears of a call the core refused; `method` is its method or JSON route ("InitializeRank", "vllm.initialize"). */
  note(method: string, error: unknown): void {
    if (!(error instanceof MetadataError) || !engineCannotShow(method, error.reason)) return;
    const { namespace = "", rank } = error.subject;
    const subject = `${namespace}\u0000${rank ?? ""}`;
    const now = this.now();
    if (now - (this.last.get(subject) ?? Number.NEGATIVE_INFINITY) < EVERY_MS) return;
    if (this.last.size >= MAX_SUBJECTS) this.forgetOld(now);
    this.last.delete(subject); // re-inserted last: the map stays in the order subjects were logged
    this.last.set(subject, now);
    this.logger.warn({ method, namespace, rank, reason: `REASON_${Reason[error.reason]}`, detail: error.message }, "refused an engine's call");
  }

  /** forgetOld drops, oldest first, the subjects whose minute is over, and more until at most half the bound is left. */
  private forgetOld(now: number): void {
    for (const [subject, at] of this.last) {
      if (now - at < EVERY_MS && this.last.size <= MAX_SUBJECTS / 2) return;
      this.last.delete(subject);
    }
  }
}

/** engineCannotShow selects the refusals worth a warning: a rank not initialized (any call), a mismatch, and a refused initialize. */
function engineCannotShow(method: string, reason: Reason): boolean {
  if (reason === Reason.RANK_NOT_INITIALIZED || reason === Reason.RANK_CONFIG_MISMATCH) return true;
  return /initialize/i.test(method) && (reason === Reason.INVALID_ARGUMENT || reason === Reason.LIMIT_EXCEEDED);
}
