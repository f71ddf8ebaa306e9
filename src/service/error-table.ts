import { Code, ConnectError } from "@connectrpc/connect";
import { ErrorInfoSchema, Reason } from "../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { DEFAULT_NAMESPACE, MetadataError } from "../core/index.js";

/**
 * codeOfReason is THE table from a domain reason to a status code. Every
 * reason the core or the server raises is here; a test walks all of it.
 */
export const codeOfReason: Record<Reason, Code> = {
  [Reason.UNSPECIFIED]: Code.Internal,
  [Reason.INVALID_ARGUMENT]: Code.InvalidArgument,
  [Reason.LIMIT_EXCEEDED]: Code.InvalidArgument,
  [Reason.PAGE_OUT_OF_RANGE]: Code.InvalidArgument,
  [Reason.RANK_NOT_INITIALIZED]: Code.FailedPrecondition,
  [Reason.RANK_CONFIG_MISMATCH]: Code.FailedPrecondition,
  [Reason.RESERVATION_NOT_FOUND]: Code.FailedPrecondition,
  [Reason.PAGE_IN_USE]: Code.FailedPrecondition,
  [Reason.SHUTTING_DOWN]: Code.Unavailable,
  [Reason.STORE_UNAVAILABLE]: Code.Unavailable,
  [Reason.INTERNAL]: Code.Internal,
  [Reason.UNAUTHENTICATED]: Code.Unauthenticated,
  [Reason.PERMISSION_DENIED]: Code.PermissionDenied,
  [Reason.OVERLOADED]: Code.Unavailable,
  [Reason.NOT_LEADER]: Code.Unavailable,
  [Reason.STARTING]: Code.Unavailable,
  [Reason.UPSTREAM_UNAVAILABLE]: Code.Unavailable,
  [Reason.READ_LEASED]: Code.FailedPrecondition,
  [Reason.WRITES_IN_FLIGHT]: Code.FailedPrecondition,
  [Reason.NAMESPACE_IN_USE]: Code.FailedPrecondition,
};

/**
 * httpStatusOf is the HTTP status of an error (as toConnectError made it)
 * on the JSON routes: from its code, except RANK_NOT_INITIALIZED, which is
 * 404 as the SGLang server answers it.
 */
export function httpStatusOf(error: ConnectError): number {
  if (reasonOf(error) === Reason.RANK_NOT_INITIALIZED) return 404;
  return httpStatusOfCode[error.code] ?? 500;
}

const httpStatusOfCode: Partial<Record<Code, number>> = {
  [Code.InvalidArgument]: 400,
  [Code.Unauthenticated]: 401,
  [Code.PermissionDenied]: 403,
  [Code.FailedPrecondition]: 409,
  [Code.ResourceExhausted]: 413,
  [Code.DeadlineExceeded]: 408,
  [Code.Canceled]: 499,
  [Code.Unavailable]: 503,
};

/** reasonOf is the reason of an error's ErrorInfo detail, UNSPECIFIED when it has none. */
export function reasonOf(error: ConnectError): Reason {
  return error.findDetails(ErrorInfoSchema)[0]?.reason ?? Reason.UNSPECIFIED;
}

/** reasonOfStackCode gives a reason to the errors that the RPC stack raises by itself. */
const reasonOfStackCode: Partial<Record<Code, Reason>> = {
  [Code.InvalidArgument]: Reason.INVALID_ARGUMENT,
  [Code.ResourceExhausted]: Reason.LIMIT_EXCEEDED,
  [Code.Internal]: Reason.INTERNAL,
};

/** namespaceOf reads the namespace of a request (a message or a JSON body), as its error's ErrorInfo names it. */
export function namespaceOf(message: unknown): string {
  const namespace = (message as { namespace?: unknown } | undefined)?.namespace;
  return typeof namespace === "string" && namespace !== "" ? namespace : DEFAULT_NAMESPACE;
}

/**
 * toConnectError turns anything a handler threw into the ConnectError sent
 * to the client: a MetadataError gets its code from codeOfReason and an
 * ErrorInfo detail; a ConnectError raised by the RPC stack itself (for
 * example a malformed message) gets the detail it lacks; anything else is a
 * bug, INTERNAL, with the original kept as the cause.
 */
export function toConnectError(error: unknown, namespace: string): ConnectError {
  if (error instanceof MetadataError) {
    const { subject } = error;
    return new ConnectError(error.message, codeOfReason[error.reason], undefined, [
      {
        desc: ErrorInfoSchema,
        value: {
          reason: error.reason,
          namespace: subject.namespace ?? namespace,
          rank: subject.rank,
          key: subject.key ?? "",
          page: subject.page,
          field: subject.field ?? "",
          leaderUrl: subject.leaderUrl ?? "",
        },
      },
    ]);
  }
  if (error instanceof ConnectError) {
    if (error.details.length > 0) return error;
    const reason = reasonOfStackCode[error.code] ?? Reason.UNSPECIFIED;
    return new ConnectError(error.rawMessage, error.code, error.metadata, [{ desc: ErrorInfoSchema, value: { reason, namespace } }]);
  }
  return new ConnectError("internal error", Code.Internal, undefined, [{ desc: ErrorInfoSchema, value: { reason: Reason.INTERNAL, namespace } }], error);
}
