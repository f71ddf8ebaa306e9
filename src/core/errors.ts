import { Reason } from "../../gen/hf3fs/metadata/v1/metadata_pb.js";

export { Reason };

/** ErrorSubject names what an error is about; every part is optional. */
export interface ErrorSubject {
  namespace?: string;
  rank?: number;
  key?: string;
  page?: number;
  /** field is the request field at fault, e.g. "pages". */
  field?: string;
  /** leaderUrl is the leader's advertise URL, with NOT_LEADER. */
  leaderUrl?: string;
}

/**
 * MetadataError is the one error type of the core. Its reason says what went
 * wrong in the contract's own vocabulary (the proto enum Reason); the service
 * edge maps each reason to a status code in one table (src/service/error-table.ts).
 */
export class MetadataError extends Error {
  override name = "MetadataError";

  constructor(
    readonly reason: Reason,
    message: string,
    readonly subject: ErrorSubject = {},
  ) {
    super(message);
  }
}

/** invalidArgument is a MetadataError for malformed input. */
export function invalidArgument(field: string, message: string, subject: ErrorSubject = {}): MetadataError {
  return new MetadataError(Reason.INVALID_ARGUMENT, message, { ...subject, field });
}

/** limitExceeded is a MetadataError for input over one of the server's limits. */
export function limitExceeded(field: string, message: string, subject: ErrorSubject = {}): MetadataError {
  return new MetadataError(Reason.LIMIT_EXCEEDED, message, { ...subject, field });
}
