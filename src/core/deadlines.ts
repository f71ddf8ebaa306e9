import type { Namespace } from "./namespace.js";
import type { Rank } from "./rank.js";
import { TimerQueue } from "./timer-queue.js";

/** Deadline is timed work of the state, due at atMs. */
export type Deadline =
  /** the rank's earliest reservation expires */
  | { atMs: number; kind: "reservations"; ns: Namespace; rank: Rank }
  /** the namespace's earliest incomplete key is due for reclaim */
  | { atMs: number; kind: "incomplete"; ns: Namespace }
  /** a deleted key's read lease ends and its page on rank can be freed */
  | { atMs: number; kind: "drain"; ns: Namespace; rank: Rank; page: number };

/**
 * Deadlines schedules the state's timed work so that expiry costs what is
 * due, not what exists: one heap entry per drain, one per rank holding
 * reservations and one per namespace holding incomplete keys, at its
 * earliest deadline (both are kept in deadline order, so that is their
 * front). Invariant, restored by the end of every operation (the state
 * arms once per call, after its loop): such a rank or namespace is armed,
 * with an entry no later than its front. An entry may be early (its front went away);
 * whoever handles it re-arms for the new front.
 */
export class Deadlines {
  private readonly queue = new TimerQueue<Deadline>();
  private readonly armed = new Set<Rank | Namespace>();

  /** nextMs is when the earliest entry is due, Infinity for none. */
  get nextMs(): number {
    return this.queue.peek()?.atMs ?? Infinity;
  }

  /** armReservations schedules the rank's earliest reservation expiry, unless an entry for it is pending. */
  armReservations(ns: Namespace, rank: Rank): void {
    if (this.armed.has(rank)) return;
    const atMs = rank.firstExpiryMs();
    if (atMs === Infinity) return;
    this.armed.add(rank);
    this.queue.push({ atMs, kind: "reservations", ns, rank });
  }

  /** armIncomplete schedules the reclaim of the namespace's earliest incomplete key, unless an entry for it is pending. */
  armIncomplete(ns: Namespace): void {
    const first = ns.incomplete.first;
    if (first < 0 || this.armed.has(ns)) return;
    this.armed.add(ns);
    this.queue.push({ atMs: ns.columns.reclaimAtMs[first]!, kind: "incomplete", ns });
  }

  /** drain schedules the end of a draining page. */
  drain(ns: Namespace, rank: Rank, page: number, atMs: number): void {
    this.queue.push({ atMs, kind: "drain", ns, rank, page });
  }

  /** popDue removes the earliest entry if due at nowMs; its rank or namespace is no longer armed. */
  popDue(nowMs: number): Deadline | undefined {
    const deadline = this.queue.popDue(nowMs);
    if (deadline?.kind === "reservations") this.armed.delete(deadline.rank);
    else if (deadline?.kind === "incomplete") this.armed.delete(deadline.ns);
    return deadline;
  }
}
