import type { CallOptions } from "@grpc/grpc-js";
import type { Etcd3, Lease } from "etcd3";
import { KeepAliveStream } from "./keep-alive-stream.js";
import type { KeepAlives } from "./lease-keep-alive.js";
import { attempts, within } from "./within.js";

/** VALID_FRACTION of a lease's TTL, counted from when its last keepalive was sent, is how long a member trusts it: room for clocks that run at slightly different rates. */
const VALID_FRACTION = 0.85;

/**
 * KEEPALIVE_ATTEMPT_MS bounds one attempt of a keepalive (etcd's leader
 * answers one from memory, without a disk write): short, so that while etcd
 * elects a new leader the attempts meet it soon after it is elected, well
 * within the lease's validity.
 */
const KEEPALIVE_ATTEMPT_MS = 300;

/**
 * EtcdSession is a member's etcd lease (a session, as etcd's own clients
 * call it: not to be confused with a key's read lease), kept alive by hand
 * (KeepAlives: on the member's lean client, or one etcd3 stream; the
 * etcd3 package's automatic keepalive and Election helper are not used: a
 * probe saw Election report a leader that no longer held its lease). The member
 * trusts the lease only until VALID_FRACTION of its TTL after the last
 * keepalive that etcd answered was sent; etcd cannot have expired it before.
 * A process that was paused (SIGSTOP) finds it lapsed when it wakes,
 * whatever its timers did meanwhile, since validity is read from the
 * monotonic clock at each use.
 */
export class EtcdSession {
  private validUntil: number;
  private timer: NodeJS.Timeout | undefined;
  private ended = false;
  private onLost!: () => void;
  /** lost resolves once the lease is no longer trusted. */
  readonly lost = new Promise<void>((resolve) => (this.onLost = resolve));

  private readonly keepAlives: KeepAlives;

  private constructor(
    private readonly lease: Lease,
    readonly id: string,
    private readonly ttlMs: number,
    grantedAt: number,
    keepAlives: (leaseId: string) => KeepAlives,
  ) {
    this.validUntil = grantedAt + ttlMs * VALID_FRACTION;
    this.keepAlives = keepAlives(id);
    // Every eighth of the TTL: while etcd elects a leader, several keepalives are under way, each in its own attempts.
    this.timer = setInterval(() => void this.keepAlive(), Math.max(ttlMs / 8, 50));
  }

  /** grant asks etcd for a lease of ttlMs (whole seconds, at least 1), within ttlMs, kept alive by `keepAlives` (one etcd3 stream unless given). */
  static async grant(client: Etcd3, ttlMs: number, keepAlives = (leaseId: string): KeepAlives => new KeepAliveStream(client, leaseId)): Promise<EtcdSession> {
    const ttlSeconds = Math.max(1, Math.ceil(ttlMs / 1_000));
    const lease = client.lease(ttlSeconds, { autoKeepAlive: false, ...within(ttlMs) });
    lease.on("lost", () => undefined); // loss is read from validity; the package's own event only mirrors it
    const sentAt = performance.now();
    const id = await lease.grant();
    return new EtcdSession(lease, id, ttlSeconds * 1_000, sentAt, keepAlives);
  }

  /** valid is true while the lease is trusted; false for good once it lapsed. */
  valid(): boolean {
    if (!this.ended && performance.now() >= this.validUntil) this.end();
    return !this.ended;
  }

  /** remainingMs is how long the lease is still trusted (0 once lapsed): the deadline of anything that needs it. */
  remainingMs(): number {
    return this.valid() ? this.validUntil - performance.now() : 0;
  }

  /**
   * call makes an etcd call that needs the lease: it must be answered while
   * the lease is trusted (keepalives answered meanwhile extend that), in
   * attempts that move off an endpoint that stopped answering (attempts).
   */
  call<T>(make: (options: CallOptions) => Promise<T>): Promise<T> {
    return attempts(() => this.remainingMs(), make);
  }

  /** revoke ends the lease in etcd (best effort within a second), so that whatever it holds is deleted now rather than at expiry. */
  async revoke(): Promise<void> {
    this.end();
    await this.lease.revoke(within(1_000)).catch(() => undefined);
  }

  /** release stops keeping the lease alive; etcd expires it after its TTL. */
  release(): void {
    this.end();
    this.lease.release();
  }

  private async keepAlive(): Promise<void> {
    if (!this.valid()) return;
    const sentAt = performance.now();
    try {
      const ttl = await attempts(
        () => this.remainingMs(),
        (options) => this.keepAlives.once(options),
        KEEPALIVE_ATTEMPT_MS,
      );
      if (ttl <= 0) return this.end();
      this.validUntil = Math.max(this.validUntil, sentAt + this.ttlMs * VALID_FRACTION);
    } catch {
      // Unanswered: the lease stays trusted until validUntil, and lapses then.
    }
    this.valid();
  }

  private end(): void {
    if (this.ended) return;
    this.ended = true;
    clearInterval(this.timer);
    this.keepAlives.close();
    this.onLost();
  }
}
