import type { MessageShape } from "@bufbuild/protobuf";
import type { MetadataService } from "../../gen/hf3fs/metadata/v1/metadata_pb.js";

/** MethodName is a MetadataService method by its local name, e.g. "batchExists". */
export type MethodName = keyof typeof MetadataService.method;

/** READS are the calls that only read: a caught-up standby may answer them itself (StandbyReads), and a relay spreads them over the members. */
export const READS: ReadonlySet<MethodName> = new Set(["batchExists", "getStats"]);

/** RequestOf is a method's request message. */
export type RequestOf<M extends MethodName> = MessageShape<(typeof MetadataService.method)[M]["input"]>;

/** ResponseOf is a method's response message. */
export type ResponseOf<M extends MethodName> = MessageShape<(typeof MetadataService.method)[M]["output"]>;

/** Answer is a method's response and the id of the server that answered it (undefined when the server answering is this process). */
export interface Answer<M extends MethodName> {
  readonly response: ResponseOf<M>;
  readonly serverId?: string;
  /** unreached: no server answered (a part of) it, and a relay answered those keys as misses (UNREACHED_HEADER). */
  readonly unreached?: boolean;
}

/**
 * MetadataCalls answers MetadataService calls for a framing that
 * translates its own dialect into them (the JSON routes): on a server its
 * own handlers, on a relay the upstream leader. It throws ConnectError, or
 * MetadataError for the edge to map.
 */
export type MetadataCalls = <M extends MethodName>(method: M, request: RequestOf<M>, signal?: AbortSignal) => Promise<Answer<M>>;
