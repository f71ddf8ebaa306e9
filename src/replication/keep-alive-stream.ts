import type { CallOptions } from "@grpc/grpc-js";
import { castGrpcError, type Etcd3, GRPCDeadlineExceededError, GRPCUnavailableError, type IDuplexStream, type ILeaseKeepAliveResponse } from "etcd3";
import type { KeepAlives } from "./lease-keep-alive.js";

type Stream = IDuplexStream<{ ID: string }, ILeaseKeepAliveResponse>;

/** Waiter is a keep-alive sent (or to be sent once the stream opens) that waits for its answer. */
interface Waiter {
  resolve(ttl: number): void;
  reject(error: Error): void;
  timer: NodeJS.Timeout | undefined;
}

/** Opened is one stream, and its keep-alives waiting for an answer, in the order they were written. */
interface Opened {
  readonly stream: Promise<Stream>;
  readonly waiting: Waiter[];
}

/**
 * KeepAliveStream sends a lease's keep-alives on one LeaseKeepAlive
 * stream, as etcd's own clients do, instead of opening a stream for each
 * (etcd3's keepaliveOnce; docs/performance.md has what that cost). etcd
 * answers a stream's keep-alives in the order they came. A keep-alive not
 * answered by its deadline, or a stream that fails or ends, fails every
 * keep-alive waiting on it with a recoverable error and drops the stream:
 * the next keep-alive opens another, on an endpoint the etcd3 package
 * picks at random, which may be the silent one again. Members send theirs
 * on the lean client instead (unaryKeepAlives), which avoids it.
 */
export class KeepAliveStream implements KeepAlives {
  private current: Opened | undefined;
  private closed = false;

  constructor(
    private readonly client: Etcd3,
    private readonly leaseId: string,
  ) {}

  /** once sends one keep-alive and resolves with the TTL etcd answered (0 once the lease is gone), or fails by options.deadline. */
  once(options: CallOptions): Promise<number> {
    if (this.closed) return Promise.reject(new Error("the lease's keep-alives were stopped"));
    const opened = this.current ?? this.open();
    this.current = opened;
    const ms = options.deadline === undefined ? undefined : Math.max(1, Number(options.deadline) - Date.now());
    return new Promise((resolve, reject) => {
      const timer =
        ms === undefined
          ? undefined
          : setTimeout(() => this.drop(opened, new GRPCDeadlineExceededError(`no answer to a lease keep-alive within ${Math.round(ms)} ms`)), ms);
      opened.waiting.push({ resolve, reject, timer });
      // Written in the order the waiters were queued: the answers come back in it.
      opened.stream.then(
        (stream) => this.current === opened && stream.write({ ID: this.leaseId }),
        () => undefined,
      );
    });
  }

  /** close ends the stream (its keep-alives answered or not) and refuses any more. */
  close(): void {
    this.closed = true;
    const opened = this.current;
    this.current = undefined;
    if (opened === undefined) return;
    this.fail(opened, new Error("the lease's keep-alives were stopped"));
    opened.stream.then(
      (stream) => stream.end(),
      () => undefined,
    );
  }

  private open(): Opened {
    const opened: Opened = { stream: this.client.leaseClient.leaseKeepAlive() as Promise<Stream>, waiting: [] };
    opened.stream.then(
      (stream) => {
        stream.on("data", (response: ILeaseKeepAliveResponse) => {
          const waiter = opened.waiting.shift();
          if (waiter === undefined) return;
          clearTimeout(waiter.timer);
          waiter.resolve(Number(response.TTL));
        });
        stream.on("error", (error: Error) => this.drop(opened, castGrpcError(error)));
        stream.on("end", () => this.drop(opened, new GRPCUnavailableError("etcd ended the lease keep-alive stream")));
      },
      (error: Error) => this.drop(opened, castGrpcError(error)),
    );
    return opened;
  }

  /** drop fails the stream's waiting keep-alives and cancels it, so that the next keep-alive opens another. */
  private drop(opened: Opened, error: Error): void {
    if (this.current === opened) this.current = undefined;
    this.fail(opened, error);
    opened.stream.then(
      (stream) => stream.cancel(),
      () => undefined,
    );
  }

  private fail(opened: Opened, error: Error): void {
    for (const waiter of opened.waiting.splice(0)) {
      clearTimeout(waiter.timer);
      waiter.reject(error);
    }
  }
}
