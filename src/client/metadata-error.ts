import { ConnectError } from "@connectrpc/connect";
import { type ErrorInfo, ErrorInfoSchema, Reason } from "../../gen/hf3fs/metadata/v1/metadata_pb.js";

/**
 * MetadataError is every error a MetadataClient call throws: a ConnectError
 * (its code, message and metadata as the server sent them) with the
 * server's ErrorInfo decoded, so that a caller branches on `reason`
 * (docs/contract.md lists them) rather than on text. A failure that never
 * reached a server (a refused connection, retries run out) has reason
 * UNSPECIFIED.
 */
export class MetadataError extends ConnectError {
  /**
   * A MetadataError is what its prototype chain says. ConnectError's own
   * check is by shape, so that every ConnectError would pass for one; its
   * name stays "ConnectError", so that it passes ConnectError's check.
   */
  static override [Symbol.hasInstance](value: unknown): boolean {
    return Function.prototype[Symbol.hasInstance].call(MetadataError, value);
  }

  /** info is the server's ErrorInfo detail; undefined when the answer carried none. */
  readonly info: ErrorInfo | undefined;

  constructor(error: ConnectError) {
    super(error.rawMessage, error.code, error.metadata, undefined, error);
    this.details.push(...error.details);
    this.info = error.findDetails(ErrorInfoSchema)[0];
  }

  /** of is the MetadataError of any failure: a ConnectError's detail decoded, anything else as ConnectError.from makes it. */
  static of(error: unknown): MetadataError {
    if (error instanceof MetadataError) return error;
    return new MetadataError(ConnectError.from(error));
  }

  /** reason says what went wrong (Reason), UNSPECIFIED without an ErrorInfo. */
  get reason(): Reason {
    return this.info?.reason ?? Reason.UNSPECIFIED;
  }

  /** namespace, rank, key, page and field name what the error is about, where the server said. */
  get namespace(): string | undefined {
    return this.info?.namespace || undefined;
  }
  get rank(): number | undefined {
    return this.info?.rank;
  }
  get key(): string | undefined {
    return this.info?.key || undefined;
  }
  get page(): number | undefined {
    return this.info?.page;
  }
  get field(): string | undefined {
    return this.info?.field || undefined;
  }
}
