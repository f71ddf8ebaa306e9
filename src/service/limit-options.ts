import { defaultStateOptions, defaultsOf, type NameOf, type OptionsOf, optionTable, type StateOptions } from "../core/options.js";
import { ENVELOPE_BYTES } from "../protocol/envelope.js";

/**
 * maxBodyBytesFor is the body the largest call within the key limits needs,
 * so that the limits agree: BatchAllocate of maxKeysPerCall keys and as
 * many prefix keys, each of maxKeyBytes, as protobuf (3 bytes of tag and
 * length per key) or as vLLM's JSON (quotes, commas, brackets), plus room
 * for the namespace and the other fields.
 */
export function maxBodyBytesFor({ maxKeysPerCall, maxKeyBytes }: Pick<StateOptions, "maxKeysPerCall" | "maxKeyBytes">): number {
  return 2 * maxKeysPerCall * (maxKeyBytes + 8) + 64 * 1024;
}

/** bufferedBytesFor gives the default bounds of unfinished request bodies: one body at the limit per connection, four in all. */
export function bufferedBytesFor(maxBodyBytes: number): { maxBufferedBytes: number; maxBufferedBytesPerConnection: number } {
  const body = maxBodyBytes + ENVELOPE_BYTES;
  return { maxBufferedBytes: 4 * body, maxBufferedBytesPerConnection: body };
}

const DEFAULT_BODY_BYTES = maxBodyBytesFor(defaultStateOptions);

/** DEFAULT_CALL_LIMITS are what a server of default options takes of one call: its keys and its body. */
export const DEFAULT_CALL_LIMITS = { maxKeysPerCall: defaultStateOptions.maxKeysPerCall, maxBodyBytes: DEFAULT_BODY_BYTES } as const;

/** LIMIT_OPTIONS bound what the edge admits: bodies, the bytes held (requests not yet served, answers not yet taken), the time to receive, the wait for a state, overload. */
export const LIMIT_OPTIONS = optionTable({
  maxBodyBytes: {
    kind: "integer",
    min: 1,
    default: DEFAULT_BODY_BYTES,
  },
  maxBufferedBytes: {
    kind: "integer",
    default: bufferedBytesFor(DEFAULT_BODY_BYTES).maxBufferedBytes,
  },
  maxBufferedBytesPerConnection: {
    kind: "integer",
    default: bufferedBytesFor(DEFAULT_BODY_BYTES).maxBufferedBytesPerConnection,
  },
  maxUnsentBytes: {
    kind: "integer",
    min: 1,
    default: bufferedBytesFor(DEFAULT_BODY_BYTES).maxBufferedBytes,
  },
  requestTimeoutMs: {
    kind: "duration",
    min: 1,
    default: 60_000,
  },
  startupHoldMs: {
    kind: "duration",
    default: 60_000,
  },
  overloadLagMs: {
    kind: "duration",
    default: 0,
  },
});

/** LimitOptions bound what the edge admits (LIMIT_OPTIONS). */
export type LimitOptions = OptionsOf<typeof LIMIT_OPTIONS>;

/** defaultLimitOptions are the documented defaults. */
export const defaultLimitOptions: LimitOptions = defaultsOf(LIMIT_OPTIONS);

/**
 * resolveLimits fills the body limits not given from the ones given (the
 * body from the key limits, the buffers from the body), then checks that
 * the buffers hold one body.
 */
export function resolveLimits(options: LimitOptions & StateOptions, given: ReadonlySet<string>, name: NameOf): void {
  if (!given.has("maxBodyBytes")) options.maxBodyBytes = maxBodyBytesFor(options);
  resolveBuffers(options, given, name);
}

/**
 * resolveBuffers fills the buffers not given from the body limit (and the
 * answers' bound from the requests'), then checks that they hold one body
 * (a server's limits, and a relay's).
 */
export function resolveBuffers(
  options: Pick<LimitOptions, "maxBodyBytes" | "maxBufferedBytes" | "maxBufferedBytesPerConnection" | "maxUnsentBytes">,
  given: ReadonlySet<string>,
  name: NameOf,
): void {
  const buffered = bufferedBytesFor(options.maxBodyBytes);
  if (!given.has("maxBufferedBytesPerConnection")) options.maxBufferedBytesPerConnection = buffered.maxBufferedBytesPerConnection;
  if (!given.has("maxBufferedBytes")) options.maxBufferedBytes = Math.max(buffered.maxBufferedBytes, options.maxBufferedBytesPerConnection);
  if (!given.has("maxUnsentBytes")) options.maxUnsentBytes = options.maxBufferedBytes;
  const { maxBufferedBytes, maxBufferedBytesPerConnection, maxBodyBytes } = options;
  if (maxBufferedBytesPerConnection < maxBodyBytes + ENVELOPE_BYTES || maxBufferedBytes < maxBufferedBytesPerConnection) {
    throw new RangeError(
      `${name("maxBufferedBytes")} (${maxBufferedBytes}) must be at least ${name("maxBufferedBytesPerConnection")} (${maxBufferedBytesPerConnection}), which must hold one body at ${name("maxBodyBytes")} (${maxBodyBytes} + ${ENVELOPE_BYTES})`,
    );
  }
}
