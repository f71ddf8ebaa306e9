import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import {
  type BatchCall,
  BatchCallSchema,
  type BatchRequest,
  type BatchResponseSchema,
  type BatchResult,
  type CallError,
  ErrorInfoSchema,
  type MetadataService,
  MetadataService as MetadataServiceDesc,
} from "../../gen/hf3fs/metadata/v1/metadata_pb.js";
import { invalidArgument, limitExceeded } from "../core/index.js";
import { codeName } from "./edge.js";
import { namespaceOf, toConnectError } from "./error-table.js";
import type { RequestOf } from "./metadata-calls.js";

/** MAX_BATCH_CALLS bounds the calls of one Batch: past it, a Batch of many empty calls would hold the event loop longer than the largest call. */
export const MAX_BATCH_CALLS = 1_024;

/** BatchedMethod is a method a Batch may carry (a case of BatchCall's oneof): a call of the write-and-read cycle, a worker's, never an admin's. */
export type BatchedMethod = Exclude<BatchCall["call"]["case"], undefined>;

/** BATCHED are the methods a Batch may carry, as the contract's BatchCall names them. */
export const BATCHED: ReadonlySet<string> = new Set(BatchCallSchema.fields.map((field) => field.localName));

/**
 * CallHeard hears of each call of a Batch once it settled, as the edge
 * hears of a call alone (its observer, and the log of refusals): its
 * method (e.g. "BatchAllocate"), its code ("ok" or a gRPC code name) and,
 * when it failed, its error.
 */
export type CallHeard = (method: string, code: string, error?: unknown) => void;

/** CallOne makes one call of a Batch as if it had come alone: its response, or it throws what that call would have failed with. */
export type CallOne = <M extends BatchedMethod>(method: M, request: RequestOf<M>) => Promise<MessageInitShape<(typeof MetadataService.method)[M]["output"]>>;

/**
 * runBatch answers a Batch: every call through `call` at once, each
 * result its response or its error (the code, message and ErrorInfo the
 * call alone would have failed with). A Batch without calls, or with a
 * call of no method, is INVALID_ARGUMENT as a whole, and one of more than
 * MAX_BATCH_CALLS calls LIMIT_EXCEEDED. Durability is the
 * edge's, for the Batch as one call: its answer waits for every change.
 * `heard` hears of each call once it settled (CallHeard).
 */
export async function runBatch(request: BatchRequest, call: CallOne, heard?: CallHeard): Promise<MessageInitShape<typeof BatchResponseSchema>> {
  if (request.calls.length === 0) throw invalidArgument("calls", "a Batch carries at least one call");
  if (request.calls.length > MAX_BATCH_CALLS) throw limitExceeded("calls", `a Batch carries at most ${MAX_BATCH_CALLS} calls, not ${request.calls.length}`);
  for (const [i, one] of request.calls.entries()) {
    if (one.call.case === undefined) throw invalidArgument("calls", `call ${i} of the Batch names no method`);
  }
  const results = await Promise.all(
    request.calls.map((one) => {
      const { case: method, value } = one.call as Exclude<BatchCall["call"], { case: undefined }>;
      const name = MetadataServiceDesc.method[method].name;
      return call(method, value as never).then(
        (response) => {
          heard?.(name, "ok");
          return { result: { case: method, value: response } } as BatchResult;
        },
        (error: unknown) => {
          const answer = toConnectError(error, namespaceOf(value));
          heard?.(name, codeName(answer.code), error);
          return { result: { case: "error", value: callError(answer) } } as BatchResult;
        },
      );
    }),
  );
  return { results };
}

/** callError is the CallError of a call that failed with `answer` (its error mapped as the edge maps a call's: toConnectError). */
function callError(answer: ConnectError) {
  return { code: answer.code, message: answer.rawMessage, info: answer.findDetails(ErrorInfoSchema)[0] ?? create(ErrorInfoSchema) };
}

/** errorOfResult is the error a call answered by `error` in a Batch throws to its caller: the same code, message and ErrorInfo, and `metadata` (the server id). */
export function errorOfResult(error: CallError, metadata?: Headers): ConnectError {
  const code = error.code in Code && error.code !== 0 ? (error.code as Code) : Code.Unknown;
  return new ConnectError(error.message, code, metadata, error.info === undefined ? [] : [{ desc: ErrorInfoSchema, value: error.info }]);
}
