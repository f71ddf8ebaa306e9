import { Code, ConnectError } from "@connectrpc/connect";
import { parseTimeout as parseConnectTimeout } from "@connectrpc/connect/protocol-connect";
import { parseTimeout as parseGrpcTimeout } from "@connectrpc/connect/protocol-grpc";

/** MAX_TIMEOUT_MS is the longest deadline a client may ask for; longer ones count as none. */
const MAX_TIMEOUT_MS = 2 ** 31 - 1;

type Headers = Record<string, string | string[] | undefined>;

/**
 * deadlineSignal is an AbortSignal that aborts when the call's deadline
 * passes: `grpc-timeout` (gRPC, gRPC-Web) or `connect-timeout-ms`
 * (Connect), from when the call arrived; undefined without one. A
 * malformed value is INVALID_ARGUMENT.
 */
export function deadlineSignal(headers: Headers): AbortSignal | undefined {
  const grpc = headers["grpc-timeout"];
  const connect = headers["connect-timeout-ms"];
  const parsed =
    typeof grpc === "string" ? parseGrpcTimeout(grpc, MAX_TIMEOUT_MS) : typeof connect === "string" ? parseConnectTimeout(connect, MAX_TIMEOUT_MS) : undefined;
  if (parsed?.error !== undefined) throw parsed.error;
  return parsed?.timeoutMs === undefined ? undefined : AbortSignal.timeout(parsed.timeoutMs);
}

/**
 * checkDeadline throws once `signal` aborted: DEADLINE_EXCEEDED, or the
 * error the RPC stack aborted it with (CANCELED). It is called right before
 * a call changes anything, so a late call changes nothing; once the core
 * call began, it completes whole.
 */
export function checkDeadline(signal: AbortSignal | undefined): void {
  if (signal?.aborted) throw abortError(signal, deadlineExceeded);
}

/** abortError is the error an aborted signal stands for: the one the RPC stack aborted it with, else its deadline's (`passed`). */
function abortError(signal: AbortSignal, passed: () => ConnectError): ConnectError {
  return signal.reason instanceof ConnectError ? signal.reason : passed();
}

/** deadlineExceeded is the error of a call whose deadline passed before it ran. */
export function deadlineExceeded(): ConnectError {
  return new ConnectError("the call's deadline passed before it ran; nothing was changed", Code.DeadlineExceeded);
}

/**
 * deadlineAnswer is what a call answers for `error` once its `deadline`
 * aborted: a call it made downstream (to a leader, to another shard) was
 * canceled by that abort, and the caller is told the deadline passed (or
 * the error the RPC stack aborted it with), not that something canceled
 * it. Any other error is answered as it is.
 */
export function deadlineAnswer(error: unknown, deadline: AbortSignal | undefined): unknown {
  if (deadline?.aborted !== true || !(error instanceof ConnectError) || error.code !== Code.Canceled) return error;
  return abortError(deadline, () => new ConnectError("the call's deadline passed before it was answered", Code.DeadlineExceeded));
}
