import { type DescMessage, ScalarType } from "@bufbuild/protobuf";
import { BinaryReader, WireType } from "@bufbuild/protobuf/wire";
import { limitExceeded, MetadataError } from "../core/index.js";

/**
 * maxEntriesFor bounds the entries of one request (protobuf fields and
 * packed values, or JSON values): every repeated field of the largest call
 * at maxKeysPerCall (ConfirmWrite's keys, pages, pages_to_release and keys_to_release; an
 * SGLang [key, page] pair is three JSON values), plus room for the rest.
 * Decoding stops there, so a body of millions of tiny entries costs no more
 * than the largest valid call.
 */
export function maxEntriesFor(maxKeysPerCall: number): number {
  return 4 * maxKeysPerCall + 64;
}

/** tooManyEntries is the error of a request past maxEntries. */
export function tooManyEntries(maxEntries: number): MetadataError {
  return limitExceeded("body", `the request has more than ${maxEntries} entries, more than any call within the per-call limits`);
}

const FIXED_WIDTH: Partial<Record<ScalarType, number>> = {
  [ScalarType.FIXED32]: 4,
  [ScalarType.SFIXED32]: 4,
  [ScalarType.FLOAT]: 4,
  [ScalarType.FIXED64]: 8,
  [ScalarType.SFIXED64]: 8,
  [ScalarType.DOUBLE]: 8,
};

/**
 * checkMessageEntries counts the fields of a binary message, the values of
 * its packed fields, and the entries of the messages it holds, together
 * (a Batch's calls carry at most what one call may), without decoding
 * them (as the batch codecs count while decoding), and throws
 * LIMIT_EXCEEDED past maxEntries. Malformed input is left to the decoder.
 */
export function checkMessageEntries(schema: DescMessage, bytes: Uint8Array, maxEntries: number): void {
  try {
    countEntries(schema, bytes, 0, maxEntries);
  } catch (error) {
    if (error instanceof MetadataError) throw error;
    // Malformed: the decoder says why.
  }
}

/** countEntries adds a message's entries to `entries` and returns the sum, throwing past maxEntries. */
function countEntries(schema: DescMessage, bytes: Uint8Array, entries: number, maxEntries: number): number {
  const reader = new BinaryReader(bytes);
  while (reader.pos < reader.len) {
    const [number, wireType] = reader.tag();
    const field = wireType === WireType.LengthDelimited ? schema.fields.find((f) => f.number === number) : undefined;
    entries++;
    const nested = field?.fieldKind === "message" ? field.message : field?.fieldKind === "list" && field.listKind === "message" ? field.message : undefined;
    if (nested !== undefined) {
      entries = countEntries(nested, reader.bytes(), entries, maxEntries);
    } else {
      const start = reader.pos;
      reader.skip(wireType, number);
      if (field?.fieldKind === "list" && field.listKind === "scalar" && field.scalar !== ScalarType.STRING && field.scalar !== ScalarType.BYTES) {
        entries += packedCount(bytes, start, reader.pos, field.scalar);
      }
    }
    if (entries > maxEntries) throw tooManyEntries(maxEntries);
  }
  return entries;
}

/** packedCount is the number of values of a packed run (from its length prefix at start to end): its varints' last bytes, or its length over the fixed width. */
function packedCount(bytes: Uint8Array, start: number, end: number, scalar: ScalarType): number {
  const prefix = new BinaryReader(bytes.subarray(start, end));
  const length = prefix.uint32();
  const width = FIXED_WIDTH[scalar];
  if (width !== undefined) return Math.ceil(length / width);
  let count = 0;
  for (let i = start + prefix.pos; i < end; i++) if (bytes[i]! < 0x80) count++;
  return count;
}
