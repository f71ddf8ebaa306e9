import type { Code, ConnectError } from "@connectrpc/connect";
import { codeToString } from "@connectrpc/connect/protocol-connect";
import { DEFAULT_NAMESPACE, MetadataError, Reason } from "../core/index.js";
import { ENVELOPE_BYTES } from "../protocol/envelope.js";
import { SERVER_ID_HEADER } from "../protocol/headers.js";
import type { AccessPolicy } from "./access-policy.js";
import { BodyBudget } from "./body-budget.js";
import { BodyPool } from "./body-pool.js";
import { checkDeadline, deadlineSignal } from "./call-deadline.js";
import { toConnectError } from "./error-table.js";
import { KeyBytesMessage } from "./key-bytes.js";
import { LargeCallLane } from "./large-call-lane.js";
import type { Leadership } from "./leadership.js";
import { commit, type Ledger } from "./ledger.js";
import type { Lifecycle } from "./lifecycle.js";
import type { LimitOptions } from "./limit-options.js";
import type { LoadShedder } from "./load-shedder.js";
import { maxEntriesFor } from "./message-entries.js";
import { nextNotice } from "./notifier.js";
import { type BodyStream, HeldBytes, lingerForBody, readBody, SlowReads } from "./read-body.js";

/** CallObserver hears of every call: its method, its code ("ok" or a gRPC code name) and its duration. */
export type CallObserver = (method: string, code: string, seconds: number) => void;

/**
 * EdgeOptions are what the edge checks calls with: its limits (LimitOptions:
 * maxBodyBytes bounds a request message or JSON body, gRPC's 5-byte envelope
 * on top; the buffers bound the bytes of unfinished bodies, in all and per
 * connection; requestTimeoutMs the time to receive a body, whatever the
 * client's deadline; startupHoldMs how long a call waits for a state or a
 * leader), and the parts of the server it consults.
 */
export interface EdgeOptions
  extends Readonly<Pick<LimitOptions, "maxBodyBytes" | "maxBufferedBytes" | "maxBufferedBytesPerConnection" | "requestTimeoutMs" | "startupHoldMs">> {
  /** ledger is the state calls run on and its store; undefined on a relay, which keeps none: nothing to commit. */
  readonly ledger?: Ledger;
  /** maxKeysPerCall bounds a request's entries (maxEntriesFor) where there is no ledger to read it from (a relay: its own --max-keys-per-call). */
  readonly maxKeysPerCall?: number;
  readonly lifecycle: Lifecycle;
  /** serverId stamps every error; undefined on a relay, whose errors keep the id of the server that answered, if any. */
  readonly serverId?: string;
  readonly observe: CallObserver;
  /** refused hears of every decoded call the core refused (its method and error), for the log of what engines cannot show; undefined: nobody. */
  readonly refused?: (method: string, error: unknown) => void;
  /** access decides which calls may run, from their authorization header; undefined: every call. */
  readonly access?: AccessPolicy;
  /** leadership refuses calls while this cluster member does not lead (NOT_LEADER); undefined: single-node, always. */
  readonly leadership?: Leadership;
  /** shedder refuses new calls while the server is overloaded; undefined: never. */
  readonly shedder?: LoadShedder;
}

/**
 * Undecoded is a request as bytes still to read (within the body limit) and
 * decode; decode throws the client's error for malformed input, and stops
 * with LIMIT_EXCEEDED past maxEntries entries (maxEntriesFor).
 */
export interface Undecoded<Req> {
  readonly body: BodyStream;
  decode(bytes: Buffer, maxEntries: number): Req;
}

/**
 * Admission is what a call a library decodes passes before its body is
 * read (readFor): "call" every MetadataService call's checks (token,
 * refusals, NOT_LEADER, overload) and the startup hold; "token" only the
 * token check (ReplicationService, which every member answers); "open"
 * nothing (health and reflection), with bodies of at most OPEN_BODY_BYTES.
 */
export type Admission = "call" | "token" | "open";

/** PreparedBody is the plain message readFor prepared; its bytes count in the body budget until release(). */
export interface PreparedBody {
  readonly bytes: Buffer;
  release(): void;
}

/** OPEN_BODY_BYTES bounds a request message of the open services (a health check names a service; a reflection request, a symbol or file). */
export const OPEN_BODY_BYTES = 64 * 1024;

/** LARGE_BODY_BYTES is the body from which a call runs in the LargeCallLane. */
const LARGE_BODY_BYTES = 1 << 20;

/**
 * Edge is the one boundary between the wire and the core, whatever the
 * framing (gRPC fast path, connect-node's gRPC, gRPC-Web and Connect, the
 * JSON dialects). For every call, in this order: it refuses the call if
 * the server does not accept calls, reads the body within the limit, waits
 * while the state loads or no leader is known (hold), decodes it, calls the
 * core, commits the call's changes before any reply, and reports the call
 * to the observer. Every failure leaves as a
 * ConnectError with an ErrorInfo detail (error-table.ts) and the server id
 * in its metadata; the framings only translate it.
 */
export class Edge {
  readonly lifecycle: Lifecycle;
  readonly serverId: string | undefined;
  /** maxBodyBytes bounds a request message (EdgeOptions.maxBodyBytes). */
  readonly maxBodyBytes: number;
  /** maxEntries bounds the entries a request may carry, from the per-call key limit (maxEntriesFor). */
  readonly maxEntries: number;
  private readonly bodyLimit: number;
  private readonly budget: BodyBudget;
  private readonly largeCalls = new LargeCallLane();
  private readonly slowReads: SlowReads;
  /** pool keeps the buffers that the bodies of `call` are joined into (not readFor's: a library's messages may keep views of theirs). */
  private readonly pool = new BodyPool();
  /** refusals holds the answer of each refusal error thrown so far (see refusal). */
  private readonly refusals = new WeakMap<MetadataError, ConnectError>();

  constructor(private readonly options: EdgeOptions) {
    this.lifecycle = options.lifecycle;
    this.serverId = options.serverId;
    this.maxBodyBytes = options.maxBodyBytes;
    this.bodyLimit = options.maxBodyBytes + ENVELOPE_BYTES;
    const maxKeysPerCall = options.ledger?.state.options.maxKeysPerCall ?? options.maxKeysPerCall;
    if (maxKeysPerCall === undefined) throw new TypeError("an edge without a ledger needs maxKeysPerCall");
    this.maxEntries = maxEntriesFor(maxKeysPerCall);
    this.slowReads = new SlowReads(options.requestTimeoutMs);
    this.budget = new BodyBudget(options.maxBufferedBytes, options.maxBufferedBytesPerConnection);
  }

  /** call runs a call whose request the framing hands over as bytes: the whole call, from refusal to commit. */
  async call<Req, Res>(method: string, request: Undecoded<Req>, handle: (request: Req) => Res | Promise<Res>): Promise<Res> {
    const started = performance.now();
    let message: Req | undefined;
    let held: HeldBytes | undefined;
    let reading = false;
    let ran = false;
    try {
      this.admit(method, headerOf(request.body, "authorization"));
      const deadline = deadlineSignal(request.body.headers);
      reading = true;
      held = await readBody(request.body, this.bodyLimit, this.budget, deadline, this.slowReads, this.pool);
      if (this.waiting()) await this.hold(deadline);
      const bytes = held.bytes;
      if (bytes.length < LARGE_BODY_BYTES) {
        this.beforeCore(deadline);
        message = request.decode(bytes, this.maxEntries);
        ran = true;
        return await this.settle(method, started, await handle(message));
      }
      const [result, durable] = await this.largeCalls.run(async (turn) => {
        this.beforeCore(deadline);
        message = request.decode(bytes, this.maxEntries);
        await turn();
        this.beforeCore(deadline);
        ran = true;
        const result = await handle(message);
        await turn();
        return [result, this.commit()] as const;
      });
      return await this.settle(method, started, result, durable);
    } catch (error) {
      if (!reading) await lingerForBody(request.body); // refused before its body was read (readBody discards the rest of what it refuses)
      throw this.fail(method, started, ran ? await this.durableBefore(error) : error, message);
    } finally {
      // The body's buffer may now serve the next call: the decoded message must not read it again.
      if (message instanceof KeyBytesMessage) message.release();
      held?.release();
    }
  }

  /**
   * callDecoded runs a call whose request a library decoded (connect-node,
   * whose body came from readFor): from refusal to commit.
   */
  async callDecoded<Req, Res>(
    method: string,
    authorization: string | undefined,
    deadline: AbortSignal,
    message: Req,
    handle: () => Promise<Res>,
  ): Promise<Res> {
    const started = performance.now();
    let ran = false;
    try {
      this.admit(method, authorization);
      this.beforeCore(deadline);
      ran = true;
      return await this.settle(method, started, await handle());
    } catch (error) {
      throw this.fail(method, started, ran ? await this.durableBefore(error) : error, message);
    }
  }

  /**
   * readFor reads the body of a call that a library will decode
   * (connect-node), after the check its admission asks for and within the
   * same limits as every other call; `prepare` turns the bytes read into
   * the plain message the library gets (decompressed, counted in the same
   * budget through `held`) and may refuse it before the library decodes it
   * (too many entries, malformed). The bytes stay counted until the
   * returned release(). A failure is reported and thrown as the call's
   * answer.
   */
  async readFor(
    method: string,
    body: BodyStream,
    admission: Admission,
    prepare: (held: HeldBytes, maxEntries: number, maxBytes: number) => Promise<Buffer>,
  ): Promise<PreparedBody> {
    const started = performance.now();
    let held: HeldBytes | undefined;
    let reading = false;
    try {
      this.admit(method, headerOf(body, "authorization"), admission);
      const deadline = deadlineSignal(body.headers);
      const open = admission === "open";
      reading = true;
      held = await readBody(body, open ? OPEN_BODY_BYTES : this.bodyLimit, this.budget, deadline, this.slowReads);
      if (admission === "call" && this.waiting()) await this.hold(deadline);
      const bytes = await prepare(held, this.maxEntries, open ? OPEN_BODY_BYTES : this.maxBodyBytes);
      const release = held.release.bind(held);
      held = undefined;
      return { bytes, release };
    } catch (error) {
      if (!reading) await lingerForBody(body);
      held?.release();
      throw this.fail(method, started, error, undefined);
    }
  }

  /**
   * holder counts, in the body budget, the bytes a streamed request holds
   * while a framing reads it message by message (a bidirectional call of an
   * open service); the framing takes and gives as messages come and go.
   */
  holder(body: BodyStream): HeldBytes {
    return new HeldBytes(Buffer.alloc(0), this.budget, body.stream?.session ?? body.socket);
  }

  /** admitsToken tells whether a call of `method` passes the token check its admission starts with (a standby asks before it forwards the request). */
  admitsToken(method: string, request: Pick<BodyStream, "headers">): boolean {
    try {
      this.options.access?.check(method, headerOf(request, "authorization"));
      return true;
    } catch {
      return false;
    }
  }

  /** close stops the edge's timer of slow reads (the server is closing). */
  close(): void {
    this.slowReads.close();
  }

  /**
   * admit throws, in this order, as far as the admission asks (Admission):
   * UNAUTHENTICATED or PERMISSION_DENIED for a call without the token it
   * needs; then, for a MetadataService call, the refusal every call gets
   * while the server does not accept calls, NOT_LEADER on a cluster member
   * that does not lead and names the leader, OVERLOADED while it sheds load.
   * A call to a member that knows no leader passes: it waits for one (hold).
   */
  private admit(method: string, authorization: string | undefined, admission: Admission = "call"): void {
    if (admission === "open") return;
    this.options.access?.check(method, authorization);
    if (admission === "token") return;
    const refusal = this.lifecycle.refusal ?? (this.options.leadership?.leaderless === true ? undefined : this.options.leadership?.refusal);
    if (refusal !== undefined) throw refusal;
    this.options.shedder?.admit();
  }

  /** waiting is true while calls wait rather than fail: the server loads its state, or this cluster member knows no leader. */
  private waiting(): boolean {
    return this.lifecycle.starting || (this.lifecycle.refusal === undefined && this.options.leadership?.leaderless === true);
  }

  /**
   * hold waits while `waiting`, at most startupHoldMs and within the call's
   * deadline. Then the call goes on, or gets DEADLINE_EXCEEDED, the
   * server's refusal (loading failed, shutting down), STARTING while the
   * state still loads, or NOT_LEADER (naming the leader now known, or none:
   * beforeCore) — with nothing applied.
   */
  private async hold(deadline: AbortSignal | undefined): Promise<void> {
    const limit = AbortSignal.timeout(this.options.startupHoldMs);
    const until = deadline === undefined ? limit : AbortSignal.any([limit, deadline]);
    while (this.waiting() && !until.aborted) await nextNotice([this.lifecycle, this.options.leadership], until);
    checkDeadline(deadline);
    const refusal = this.lifecycle.refusal ?? (this.lifecycle.starting ? STILL_STARTING : undefined);
    if (refusal !== undefined) throw refusal;
  }

  /**
   * beforeCore is the last check before a call is decoded and run: its
   * deadline, leadership and the load again (the body may have taken a
   * while: the member may have stepped down, and the loop may have fallen
   * behind meanwhile). A call refused here costs no decoding and changes
   * nothing; one that passes runs whole, in this event turn.
   */
  private beforeCore(deadline: AbortSignal | undefined): void {
    checkDeadline(deadline);
    const notLeader = this.options.leadership?.refusal;
    if (notLeader !== undefined) throw notLeader;
    this.options.shedder?.admit();
  }

  /** settle commits the call's changes (unless `durable` is that commit, issued already) and reports its success; the reply waits for both. */
  private async settle<Res>(method: string, started: number, result: Res, durable = this.commit()): Promise<Res> {
    await durable;
    this.options.observe(method, "ok", (performance.now() - started) / 1_000);
    return result;
  }

  /** fail maps a failure to the ConnectError the client gets, stamped with the server id, and reports it. */
  private fail(method: string, started: number, error: unknown, message: unknown): ConnectError {
    const connectError =
      message === undefined && error instanceof MetadataError ? this.refusal(error) : this.stamped(toConnectError(error, namespaceOf(message)));
    this.options.observe(method, codeName(connectError.code), (performance.now() - started) / 1_000);
    if (message !== undefined) this.options.refused?.(method, error);
    return connectError;
  }

  /**
   * refusal is the answer to a call refused before it was decoded. The
   * refusals (overloaded, not leader, shutting down) are errors made once
   * and thrown again and again, so their answer is made once too: under a
   * flood of calls, a shed call then costs no new error (and no stack
   * trace) of its own.
   */
  private refusal(error: MetadataError): ConnectError {
    let answer = this.refusals.get(error);
    if (answer === undefined) {
      answer = this.stamped(toConnectError(error, namespaceOf(undefined)));
      this.refusals.set(error, answer);
    }
    return answer;
  }

  /**
   * durableBefore is the error a call that reached the core answers: its
   * own, once every change made before it is durable (the core's error may
   * rest on them: RANK_NOT_INITIALIZED after a reset not yet in the log),
   * or the commit's failure, when they never became durable. No answer, OK
   * or error, shows a change before it is durable.
   */
  private async durableBefore(error: unknown): Promise<unknown> {
    return this.commit().then(
      () => error,
      (failure: unknown) => failure,
    );
  }

  /** commit makes the changes of the call durable (none on a relay). */
  private commit(): Promise<void> {
    return this.options.ledger === undefined ? NOTHING_TO_COMMIT : commit(this.options.ledger);
  }

  /** stamped puts the server id in an error's metadata (a relay's errors keep what they carry). */
  private stamped(error: ConnectError): ConnectError {
    if (this.serverId !== undefined) error.metadata.set(SERVER_ID_HEADER, this.serverId);
    return error;
  }
}

/** NOTHING_TO_COMMIT is the commit of a call on a relay. */
const NOTHING_TO_COMMIT = Promise.resolve();

/** STILL_STARTING is the answer to a call that waited --startup-hold while the state was still loading. */
const STILL_STARTING = new MetadataError(Reason.STARTING, "the server is still loading its state after --startup-hold; retry shortly");

/** headerOf reads a request header that must appear once; undefined when absent or repeated. */
function headerOf(body: Pick<BodyStream, "headers">, name: string): string | undefined {
  const value = body.headers[name];
  return typeof value === "string" ? value : undefined;
}

/** codeName is the label of a code in metrics and JSON errors, e.g. "failed_precondition". */
export function codeName(code: Code): string {
  return codeToString(code);
}

/** namespaceOf reads the namespace of a request (a message or a JSON body), for error details. */
function namespaceOf(message: unknown): string {
  const namespace = (message as { namespace?: unknown } | undefined)?.namespace;
  return typeof namespace === "string" && namespace !== "" ? namespace : DEFAULT_NAMESPACE;
}
