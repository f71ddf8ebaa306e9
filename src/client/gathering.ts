import { create } from "@bufbuild/protobuf";
import { type CallOptions, Code, ConnectError } from "@connectrpc/connect";
import { BatchRequestSchema, type BatchResponse, ErrorInfoSchema, Reason } from "../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { SERVER_ID_HEADER } from "../protocol/headers.js";
import { BATCHED, type BatchedMethod, errorOfResult } from "../service/batch-calls.js";
import { keyBytesOf } from "../service/key-bytes.js";
import { maxEntriesFor } from "../service/message-entries.js";
import type { Method } from "./leader-following.js";

/** Sent is an upstream's answer to one call: its response, the server that gave it, and how many sends it took. */
export interface Sent {
  readonly response: unknown;
  readonly serverId: string | null;
  readonly attempts: number;
}

/** Send sends one call upstream, held within `holdMs` (LeaderFollowing.call). */
export type Send = (method: Method, request: unknown, options: CallOptions | undefined, holdMs: number) => Promise<Sent>;

/** WIDTH is how many calls (or Batches) go to one upstream at once before the next wait to leave together. */
const WIDTH = 2;

/** MAX_CALLS bounds the calls of one Batch (within the server's MAX_BATCH_CALLS). */
const MAX_CALLS = 64;

/** UNSUPPORTED_MS is how long calls go alone after a server answered that it does not know Batch (an older member). */
const UNSUPPORTED_MS = 60_000;

/** BatchLimits are what a server takes of one call, which a Batch of gathered calls stays within (its --max-keys-per-call and --max-body-bytes). */
export interface BatchLimits {
  readonly maxKeysPerCall: number;
  readonly maxBodyBytes: number;
}

/** Waiting is a call queued to leave in the next Batch. */
interface Waiting {
  readonly method: BatchedMethod;
  readonly request: { namespace: string };
  readonly entries: number;
  readonly bytes: number;
  readonly options: CallOptions | undefined;
  readonly holdMs: number;
  resolve(sent: Sent): void;
  reject(error: unknown): void;
}

/**
 * Gathering sends one upstream's calls of the write-and-read cycle
 * together: those that come in one turn of the event loop (the calls of
 * one read from the callers' connections) leave at its end as one Batch,
 * or alone when one came; while WIDTH are on their way, they wait and
 * leave together as soon as one comes back. So a shard pays what a call
 * costs whatever its size (its stream, its frames, its wake-up, its
 * commit) once for many, and no call waits longer than the turn while it
 * keeps up. The other calls go at once. A Batch holds at most
 * MAX_CALLS calls, the entries of one call at the per-call key limit, and
 * at most the server's body limit by an upper bound of its bytes;
 * each call gets its own result, but one UNAVAILABLE there, which goes
 * again alone (held, as a call alone is). A Batch refused as a whole is
 * sent again call by call, each then getting its own answer, except when
 * the hold was spent (UNAVAILABLE, which every call would meet again); a
 * server that does not know Batch gets calls alone for UNSUPPORTED_MS,
 * and one whose limits a Batch passed (lower than those given) Batches of
 * at most half its size from then on.
 */
export class Gathering {
  private inFlight = 0;
  /** flushing is true while a flush waits for the turn's end. */
  private flushing = false;
  private queue: Waiting[] = [];
  private maxEntries: number;
  private maxBytes: number;
  private unsupportedUntil = 0;

  constructor(
    private readonly send: Send,
    limits: BatchLimits,
    private readonly holdMs: number,
    /** onBatch hears of each Batch sent, with its number of calls (a relay's metrics). */
    private readonly onBatch: (calls: number) => void = () => undefined,
    private readonly now: () => number = Date.now,
  ) {
    this.maxEntries = maxEntriesFor(limits.maxKeysPerCall);
    this.maxBytes = limits.maxBodyBytes;
  }

  /** call sends a call, at once or in the next Batch, and answers what its server answered for it. */
  call(method: Method, request: unknown, options: CallOptions | undefined, holdMs: number): Promise<Sent> {
    if (!BATCHED.has(method) || this.now() < this.unsupportedUntil) {
      return this.alone(method, request, options, holdMs);
    }
    const entries = entriesOf(request as never);
    const bytes = bytesOf(request as never);
    if (entries > this.maxEntries || bytes > this.maxBytes) return this.alone(method, request, options, holdMs);
    return new Promise<Sent>((resolve, reject) => {
      const waiting: Waiting = { method: method as BatchedMethod, request: request as Waiting["request"], entries, bytes, options, holdMs, resolve, reject };
      const signal = options?.signal;
      this.flushAfterTurn();
      if (signal == null) return void this.queue.push(waiting);
      const onAbort = () => {
        this.queue = this.queue.filter((w) => w !== waiting);
        reject(new ConnectError("the call was canceled", Code.Canceled));
      };
      signal.addEventListener("abort", onAbort, { once: true });
      const done = () => signal.removeEventListener("abort", onAbort);
      waiting.resolve = (sent) => {
        done();
        resolve(sent);
      };
      waiting.reject = (error) => {
        done();
        reject(error);
      };
      this.queue.push(waiting);
    });
  }

  /** flushAfterTurn flushes once the event loop's turn is over (setImmediate), so that the calls that came in it leave together. */
  private flushAfterTurn(): void {
    if (this.flushing) return;
    this.flushing = true;
    setImmediate(() => {
      this.flushing = false;
      this.flush();
    });
  }

  private async alone(method: Method, request: unknown, options: CallOptions | undefined, holdMs: number): Promise<Sent> {
    this.inFlight++;
    try {
      return await this.send(method, request, options, holdMs);
    } finally {
      this.inFlight--;
      this.flush();
    }
  }

  /** flush sends what waits while there is room: one call alone, more as a Batch. */
  private flush(): void {
    while (this.inFlight < WIDTH && this.queue.length > 0) {
      let entries = 0;
      let bytes = 0;
      let taken = 0;
      while (taken < this.queue.length && taken < MAX_CALLS) {
        const next = this.queue[taken]!;
        if (taken > 0 && (entries + next.entries > this.maxEntries || bytes + next.bytes > this.maxBytes)) break;
        entries += next.entries;
        bytes += next.bytes;
        taken++;
      }
      const parts = this.queue.slice(0, taken);
      this.queue = this.queue.slice(taken);
      if (parts.length === 1) this.sendAlone(parts[0]!);
      else void this.batch(parts);
    }
  }

  /** sendAlone sends a waiting call alone (or again, out of a Batch), and gives it that answer. */
  private sendAlone(part: Waiting): void {
    this.alone(part.method, part.request, part.options, part.holdMs).then(part.resolve, part.reject);
  }

  /** batch sends parts as one Batch and gives each its result. */
  private async batch(parts: Waiting[]): Promise<void> {
    this.inFlight++;
    this.onBatch(parts.length);
    try {
      const request = create(BatchRequestSchema, { calls: parts.map((p) => ({ call: { case: p.method, value: p.request as never } })) });
      // The Batch has no deadline of its own (each call keeps its own signal, above); the reads' header hook is the same on every call.
      const onHeader = parts[0]!.options?.onHeader;
      const sent = await this.send("batch", request, onHeader === undefined ? undefined : { onHeader }, this.holdMs);
      const { results } = sent.response as BatchResponse;
      if (results.length !== parts.length) throw new ConnectError(`a Batch of ${parts.length} calls got ${results.length} results`, Code.Internal);
      const metadata = sent.serverId === null ? undefined : new Headers({ [SERVER_ID_HEADER]: sent.serverId });
      for (const [i, part] of parts.entries()) {
        const { result } = results[i]!;
        // A call UNAVAILABLE in the Batch (a shard behind a routing member, out of reach) goes again alone, held as any call.
        if (result.case === "error" && result.value.code === Code.Unavailable) this.sendAlone(part);
        else if (result.case === "error") part.reject(errorOfResult(result.value, metadata));
        else if (result.case === part.method) part.resolve({ response: result.value, serverId: sent.serverId, attempts: sent.attempts });
        else part.reject(new ConnectError(`a ${part.method} call of a Batch got a ${result.case ?? "missing"} result`, Code.Internal));
      }
    } catch (e) {
      const error = ConnectError.from(e);
      if (error.code === Code.Unavailable) {
        for (const part of parts) part.reject(error);
        return;
      }
      if (error.code === Code.Unimplemented) this.unsupportedUntil = this.now() + UNSUPPORTED_MS;
      // Past the server's limits (lower than the ones given): the next Batches hold at most half as much, until they fit.
      if (isLimitExceeded(error)) {
        this.maxEntries = Math.min(this.maxEntries, Math.floor(parts.reduce((sum, p) => sum + p.entries, 0) / 2));
        this.maxBytes = Math.min(this.maxBytes, Math.floor(parts.reduce((sum, p) => sum + p.bytes, 0) / 2));
      }
      for (const part of parts) this.sendAlone(part);
    } finally {
      this.inFlight--;
      this.flush();
    }
  }
}

/** isLimitExceeded is true for a refusal for size: REASON_LIMIT_EXCEEDED, or RESOURCE_EXHAUSTED (a body past the limit, refused before it is read). */
function isLimitExceeded(error: ConnectError): boolean {
  return error.code === Code.ResourceExhausted || error.findDetails(ErrorInfoSchema).some((info) => info.reason === Reason.LIMIT_EXCEEDED);
}

/** Lists are the repeated fields of the calls a Batch carries. */
interface Lists {
  keys?: unknown[];
  prefixKeys?: unknown[];
  pages?: unknown[];
  pagesToRelease?: unknown[];
  keysToRelease?: unknown[];
}

/**
 * entriesOf is at least what a call adds to a Batch's entries, as the
 * server counts them (checkMessageEntries): its lists' values, and room
 * for its scalar fields and the Batch's own.
 */
function entriesOf(request: Lists): number {
  const { pages, pagesToRelease, keysToRelease } = request;
  return 8 + keyCount(request, "keys") + keyCount(request, "prefixKeys") + (pages?.length ?? 0) + (pagesToRelease?.length ?? 0) + (keysToRelease?.length ?? 0);
}

/** keyCount is the number of keys in a key field, read from its bytes where a codec left them (no string made). */
function keyCount(request: Lists, field: "keys" | "prefixKeys"): number {
  return keyBytesOf(request, field)?.length ?? request[field]?.length ?? 0;
}

/**
 * bytesOf is at least what a call adds to a Batch's encoding: 3 bytes per
 * UTF-16 unit of its strings (UTF-8's most), 6 per string for its tag and
 * length, 11 per page (a negative int32's varint and its tag), and 64 for
 * its scalars and its place in the Batch; keys that came as bytes
 * (keyBytesOf) count as many as they are. Reading lengths only, it costs
 * the relay no encoding; with keys of ASCII as strings it is about 3× the truth.
 */
export function bytesOf(request: Lists & { namespace?: string }): number {
  const bytes =
    64 + 3 * (request.namespace?.length ?? 0) + stringBytes(request, "keys") + stringBytes(request, "prefixKeys") + stringBytes(request, "keysToRelease");
  return bytes + 11 * ((request.pages?.length ?? 0) + (request.pagesToRelease?.length ?? 0));
}

/** stringBytes is bytesOf's bound for one list of strings. */
function stringBytes(request: Lists, field: "keys" | "prefixKeys" | "keysToRelease"): number {
  let bytes = 0;
  const keys = keyBytesOf(request, field);
  if (keys !== undefined) {
    for (let i = 0; i < keys.length; i++) bytes += 6 + keys.ends[i]! - keys.starts[i]!;
    return bytes;
  }
  for (const key of request[field] ?? []) bytes += 6 + 3 * (key as string).length;
  return bytes;
}
