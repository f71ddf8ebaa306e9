import type { Code, ConnectError } from "@connectrpc/connect";
import { codeToString } from "@connectrpc/connect/protocol-connect";
import { MetadataError, Reason } from "../core/index.js";
import { ENVELOPE_BYTES } from "../protocol/envelope.js";
import { SERVER_ID_HEADER } from "../protocol/headers.js";
import type { AccessPolicy } from "./access-policy.js";
import type { BodyReader, Held, RequestBody, RequestHeaders } from "./body-reader.js";
import { checkDeadline, deadlineAnswer, deadlineSignal } from "./call-deadline.js";
import { namespaceOf, toConnectError } from "./error-table.js";
import { KeyBytesMessage } from "./key-bytes.js";
import { LargeCallLane } from "./large-call-lane.js";
import type { Leadership } from "./leadership.js";
import { commit, type Ledger } from "./ledger.js";
import type { Lifecycle } from "./lifecycle.js";
import type { LimitOptions } from "./limit-options.js";
import type { LoadShedder } from "./load-shedder.js";
import { maxEntriesFor } from "./message-entries.js";
import { nextNotice } from "./notifier.js";

/** CallObserver hears of every call: its method, its code ("ok" or a gRPC code name) and its duration. */
export type CallObserver = (method: string, code: string, seconds: number) => void;

/**
 * EdgeOptions are what the edge checks calls with: its limits (LimitOptions:
 * maxBodyBytes bounds a request message or JSON body, gRPC's 5-byte envelope
 * on top; startupHoldMs how long a call waits for a state or a leader), the
 * reader of bodies (which holds the limits of buffered bytes and of slow
 * bodies), and the parts of the server it consults.
 */
export interface EdgeOptions extends Readonly<Pick<LimitOptions, "maxBodyBytes" | "startupHoldMs">> {
  /** reader reads the bodies of calls (framing/http/body-reader.ts). */
  readonly reader: BodyReader;
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
  /** position is the replicated log's position an answer reflects (a cluster member's; LOG_POSITION): undefined on a single node. */
  readonly position?: () => number;
  /** isRead tells a call, by its name, that only reads (READS): a caught-up standby may answer it (Leadership.refusalFor); undefined: none. */
  readonly isRead?: (method: string) => boolean;
  /** isLookup tells a call, by its name, that engines wait on without a deadline (LOOKUPS): a member that has known no leader for --read-hold lets it pass, to be answered as misses (answeringMisses); undefined: none. */
  readonly isLookup?: (method: string) => boolean;
}

/**
 * Undecoded is a request as bytes still to read (within the body limit) and
 * decode; decode throws the client's error for malformed input, and stops
 * with LIMIT_EXCEEDED past maxEntries entries (maxEntriesFor).
 */
export interface Undecoded<Req> {
  readonly body: RequestBody;
  decode(bytes: Buffer, maxEntries: number): Req;
}

/**
 * Admission is what a call passes before its body is read (EdgeCall.read):
 * "call" every MetadataService call's checks (token,
 * refusals, NOT_LEADER, overload) and the startup hold; "token" only the
 * token check (ReplicationService, which every member answers); "open"
 * nothing (health and reflection), with bodies of at most OPEN_BODY_BYTES.
 */
export type Admission = "call" | "token" | "open";

/** OPEN_BODY_BYTES bounds a request message of the open services (a health check names a service; a reflection request, a symbol or file). */
export const OPEN_BODY_BYTES = 64 * 1024;

/** LARGE_BODY_BYTES is the body from which a call runs in the LargeCallLane. */
const LARGE_BODY_BYTES = 1 << 20;

/** Prepare turns the bytes of a body read into the plain message a library decodes (decompressed, counted through `held`), or refuses it. */
export type Prepare = (held: Held, maxEntries: number, maxBytes: number) => Promise<Buffer>;

/**
 * Edge is the one boundary between the wire and the core, whatever the
 * framing (gRPC fast path, connect-node's gRPC, gRPC-Web and Connect, the
 * JSON dialects). A framing enters every call once (enter, or call for a
 * framing that decodes its own requests), and the call then passes, in
 * this order: admission (the token, the refusal of a server that does not
 * accept calls, NOT_LEADER, overload), the body read within the limit, the
 * hold while the state loads or no leader is known, the deadline, decoding,
 * the core, the commit of the call's changes before any reply, and the
 * report to the observer. Every failure leaves as a ConnectError with an
 * ErrorInfo detail (error-table.ts) and the server id in its metadata; the
 * framings only translate it.
 */
export class Edge {
  readonly lifecycle: Lifecycle;
  readonly serverId: string | undefined;
  /** maxBodyBytes bounds a request message (EdgeOptions.maxBodyBytes). */
  readonly maxBodyBytes: number;
  /** maxEntries bounds the entries a request may carry, from the per-call key limit (maxEntriesFor). */
  readonly maxEntries: number;
  /** reader reads the bodies of every call (and counts those of an open service's streams: BodyReader.holder). */
  readonly reader: BodyReader;
  /** position is the log position a successful answer of a cluster member reflects, for its LOG_POSITION header; undefined on a single node. */
  readonly position: (() => number) | undefined;
  private readonly rules: Rules;

  constructor(options: EdgeOptions) {
    this.rules = new Rules(options);
    this.lifecycle = options.lifecycle;
    this.serverId = options.serverId;
    this.maxBodyBytes = options.maxBodyBytes;
    this.maxEntries = this.rules.maxEntries;
    this.reader = options.reader;
    this.position = options.position;
  }

  /** enter starts a call at the edge (its clock starts); the framing then reads it (EdgeCall.read) and runs it (EdgeCall.run). */
  enter(method: string, body: RequestBody, admission: Admission = "call"): EdgeCall {
    return new EdgeCall(this.rules, method, body, admission);
  }

  /** call runs a call whose request the framing hands over as bytes: the whole call, from admission to commit. */
  async call<Req, Res>(method: string, request: Undecoded<Req>, handle: (request: Req, deadline?: AbortSignal) => Res | Promise<Res>): Promise<Res> {
    const call = new EdgeCall(this.rules, method, request.body, "call");
    try {
      const bytes = await call.read();
      return await call.run((maxEntries) => request.decode(bytes, maxEntries), handle);
    } finally {
      call.release();
    }
  }

  /** admitsToken tells whether a call of `method` passes the token check its admission starts with (a standby asks before it forwards the request). */
  admitsToken(method: string, request: RequestBody): boolean {
    try {
      this.rules.access?.check(method, headerOf(request.headers, "authorization"));
      return true;
    } catch {
      return false;
    }
  }

  /** close stops the reader's timer of slow reads (the server is closing). */
  close(): void {
    this.reader.close();
  }
}

/**
 * EdgeCall is one call at the edge, entered once: read admits it and reads
 * its body, run decodes and runs it through to its commit; a failure of
 * either is reported once and thrown as the call's answer. Its bytes stay
 * counted in the body budget until release().
 */
export class EdgeCall {
  private readonly started = performance.now();
  private held: Held | undefined;
  /** size is the body's length once read (-1 before): a large one runs in the large-call lane. */
  private size = -1;
  private deadline: AbortSignal | undefined;
  private message: unknown;

  constructor(
    private readonly rules: Rules,
    private readonly method: string,
    private readonly body: RequestBody,
    private readonly admission: Admission,
  ) {}

  /**
   * read admits the call (as far as its admission asks), reads its body
   * within the limit (a MetadataService call's into a pooled buffer), and
   * waits out the hold (a MetadataService call); `prepare` turns the bytes
   * into what a library decodes. It returns the bytes to decode.
   */
  async read(prepare?: Prepare): Promise<Buffer> {
    const rules = this.rules;
    let reading = false;
    try {
      rules.admit(this.method, this.body, this.admission);
      this.deadline = deadlineSignal(this.body.headers);
      const open = this.admission === "open";
      reading = true;
      // A pooled buffer is reused once released: only a body that nothing keeps a view of past its call (not a library's) is pooled.
      this.held = await rules.reader.read(this.body, open ? OPEN_BODY_BYTES : rules.bodyLimit, this.deadline, prepare === undefined);
      this.size = this.held.bytes.length;
      if (this.admission === "call" && rules.waiting(this.method, this.body)) await rules.hold(this.method, this.body, this.deadline);
      return prepare === undefined ? this.held.bytes : await prepare(this.held, rules.maxEntries, open ? OPEN_BODY_BYTES : rules.maxBodyBytes);
    } catch (error) {
      if (!reading) await rules.reader.linger(this.body); // refused before its body was read (the reader discards the rest of what it refuses)
      this.release();
      throw rules.fail(this.method, this.started, error, undefined);
    }
  }

  /**
   * run decodes the call's request (decode gets the bound on its entries),
   * runs `handle` on it, and commits the call's changes before it returns
   * the answer; a body of LARGE_BODY_BYTES or more runs in the large-call
   * lane. `deadline` replaces the one the call's headers set (a library's
   * signal, which also aborts when the client leaves).
   */
  async run<Req, Res>(
    decode: (maxEntries: number) => Req,
    handle: (request: Req, deadline?: AbortSignal) => Res | Promise<Res>,
    deadline = this.deadline,
  ): Promise<Res> {
    const rules = this.rules;
    if (this.size < 0) throw new TypeError(`${this.method} runs before its body was read`);
    let ran = false;
    try {
      if (this.size < LARGE_BODY_BYTES) {
        rules.beforeCore(deadline, this.method, this.body);
        const message = decode(rules.maxEntries);
        this.message = message;
        ran = true;
        return await rules.settle(this.method, this.started, await handle(message, deadline));
      }
      const [result, durable] = await rules.largeCalls.run(async (turn) => {
        rules.beforeCore(deadline, this.method, this.body);
        const message = decode(rules.maxEntries);
        this.message = message;
        await turn();
        rules.beforeCore(deadline, this.method, this.body);
        ran = true;
        const result = await handle(message, deadline);
        await turn();
        return [result, rules.commit()] as const;
      });
      return await rules.settle(this.method, this.started, result, durable);
    } catch (error) {
      throw rules.fail(this.method, this.started, deadlineAnswer(ran ? await rules.durableBefore(error) : error, deadline), this.message);
    }
  }

  /** release gives the call's bytes back to the budget (and its buffer to the pool); the decoded message must not read them again. Idempotent. */
  release(): void {
    if (this.message instanceof KeyBytesMessage) this.message.release();
    this.held?.release();
    this.held = undefined;
  }
}

/**
 * Rules are what the edge checks and does around every call, shared by the
 * Edge and its calls (not exported: a framing reaches them through Edge
 * and EdgeCall only).
 */
class Rules {
  readonly access: AccessPolicy | undefined;
  readonly maxBodyBytes: number;
  readonly bodyLimit: number;
  readonly maxEntries: number;
  readonly reader: BodyReader;
  readonly largeCalls = new LargeCallLane();
  /** refusals holds the answer of each refusal error thrown so far (see refusal). */
  private readonly refusals = new WeakMap<MetadataError, ConnectError>();

  constructor(private readonly options: EdgeOptions) {
    this.access = options.access;
    this.maxBodyBytes = options.maxBodyBytes;
    this.bodyLimit = options.maxBodyBytes + ENVELOPE_BYTES;
    this.reader = options.reader;
    const maxKeysPerCall = options.ledger?.state.options.maxKeysPerCall ?? options.maxKeysPerCall;
    if (maxKeysPerCall === undefined) throw new TypeError("an edge without a ledger needs maxKeysPerCall");
    this.maxEntries = maxEntriesFor(maxKeysPerCall);
  }

  /**
   * admit throws, in this order, as far as the admission asks (Admission):
   * UNAUTHENTICATED or PERMISSION_DENIED for a call without the token it
   * needs; then, for a MetadataService call, the refusal every call gets
   * while the server does not accept calls, NOT_LEADER on a cluster member
   * that does not lead and names the leader, OVERLOADED while it sheds load.
   * A call to a member that knows no leader passes: it waits for one (hold).
   */
  admit(method: string, body: RequestBody, admission: Admission): void {
    if (admission === "open") return;
    this.options.access?.check(method, headerOf(body.headers, "authorization"));
    if (admission === "token") return;
    const lifecycle = this.options.lifecycle;
    const refusal = lifecycle.refusal ?? (this.options.leadership?.leaderless === true ? undefined : this.leaderRefusal(method, body));
    if (refusal !== undefined) throw refusal;
    this.options.shedder?.admit();
  }

  /** waiting is true while a call waits rather than fails: the server loads its state, or this cluster member knows no leader (and does not answer the call itself). */
  waiting(method: string, body: RequestBody): boolean {
    const lifecycle = this.options.lifecycle;
    if (lifecycle.starting) return true;
    const leadership = this.options.leadership;
    return lifecycle.refusal === undefined && leadership?.leaderless === true && this.leaderRefusal(method, body) !== undefined;
  }

  /**
   * hold waits while `waiting`, at most startupHoldMs and within the call's
   * deadline. Then the call goes on, or gets DEADLINE_EXCEEDED, the
   * server's refusal (loading failed, shutting down), STARTING while the
   * state still loads, or NOT_LEADER (naming the leader now known, or none:
   * beforeCore) — with nothing applied.
   */
  async hold(method: string, body: RequestBody, deadline: AbortSignal | undefined): Promise<void> {
    const lifecycle = this.options.lifecycle;
    const limit = AbortSignal.timeout(this.options.startupHoldMs);
    const until = deadline === undefined ? limit : AbortSignal.any([limit, deadline]);
    while (this.waiting(method, body) && !until.aborted) {
      // A lookup waits no longer than the rest of --read-hold (then it passes, to be answered as misses); a timer may wake early: look again.
      const missedIn = this.isLookup(method) ? this.options.leadership!.lookupsMissedInMs() : Number.POSITIVE_INFINITY;
      await nextNotice(
        [lifecycle, this.options.leadership],
        missedIn === Number.POSITIVE_INFINITY ? until : AbortSignal.any([until, AbortSignal.timeout(Math.ceil(missedIn) + 1)]),
      );
    }
    checkDeadline(deadline);
    const refusal = lifecycle.refusal ?? (lifecycle.starting ? STILL_STARTING : undefined);
    if (refusal !== undefined) throw refusal;
  }

  /**
   * beforeCore is the last check before a call is decoded and run: its
   * deadline, the server's refusal, leadership and the load again (the body
   * may have taken a while: the store may have failed, the member may have
   * stepped down, and the loop may have fallen behind meanwhile). A call
   * refused here costs no decoding and changes nothing; one that passes
   * runs whole, in this event turn.
   */
  beforeCore(deadline: AbortSignal | undefined, method: string, body: RequestBody): void {
    checkDeadline(deadline);
    const refusal = this.options.lifecycle.refusal ?? this.leaderRefusal(method, body);
    if (refusal !== undefined) throw refusal;
    this.options.shedder?.admit();
  }

  /** leaderRefusal is NOT_LEADER for a call on a member that does not lead, unless it answers that read itself; what a call is, is asked only then (a leader's calls pass first). */
  private leaderRefusal(method: string, body: RequestBody): MetadataError | undefined {
    const leadership = this.options.leadership;
    if (leadership?.refusal === undefined) return undefined;
    // A member that has known no leader for --read-hold answers lookups as misses (answeringMisses), in this same turn.
    if (this.isLookup(method) && leadership.missesLookups) return undefined;
    return leadership.refusalFor(this.options.isRead?.(method) === true, body);
  }

  /** isLookup tells a lookup (EdgeOptions.isLookup) on a cluster member. */
  private isLookup(method: string): boolean {
    return this.options.leadership !== undefined && this.options.isLookup?.(method) === true;
  }

  /** settle commits the call's changes (unless `durable` is that commit, issued already) and reports its success; the reply waits for both. */
  async settle<Res>(method: string, started: number, result: Res, durable = this.commit()): Promise<Res> {
    await durable;
    this.options.observe(method, "ok", (performance.now() - started) / 1_000);
    return result;
  }

  /** fail maps a failure to the ConnectError the client gets, stamped with the server id, and reports it. */
  fail(method: string, started: number, error: unknown, message: unknown): ConnectError {
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
  async durableBefore(error: unknown): Promise<unknown> {
    return this.commit().then(
      () => error,
      (failure: unknown) => failure,
    );
  }

  /** commit makes the changes of the call durable (none on a relay). */
  commit(): Promise<void> {
    return this.options.ledger === undefined ? NOTHING_TO_COMMIT : commit(this.options.ledger);
  }

  /** stamped puts the server id in an error's metadata (a relay's errors keep what they carry). */
  private stamped(error: ConnectError): ConnectError {
    if (this.options.serverId !== undefined) error.metadata.set(SERVER_ID_HEADER, this.options.serverId);
    return error;
  }
}

/** NOTHING_TO_COMMIT is the commit of a call on a relay. */
const NOTHING_TO_COMMIT = Promise.resolve();

/** STILL_STARTING is the answer to a call that waited --startup-hold while the state was still loading. */
const STILL_STARTING = new MetadataError(Reason.STARTING, "the server is still loading its state after --startup-hold; retry shortly");

/** headerOf reads a request header that must appear once; undefined when absent or repeated. */
function headerOf(headers: RequestHeaders, name: string): string | undefined {
  const value = headers[name];
  return typeof value === "string" ? value : undefined;
}

/** codeName is the label of a code in metrics and JSON errors, e.g. "failed_precondition". */
export function codeName(code: Code): string {
  return codeToString(code);
}
