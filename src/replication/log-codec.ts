import { Packr } from "msgpackr";
import type { Change } from "../core/index.js";
import { FORMAT_BY_TAG, formatOf, type LogField } from "../core/index.js";

/**
 * The replicated log's records. A leader appends one group per group
 * commit: every change of the calls it commits together, as one msgpack
 * value (namespaces listed once, each change a tuple of its kind's tag,
 * its namespace's index and its fields: CHANGE_FORMATS). A group whose bytes
 * pass PART_BYTES is cut into parts, each its own log entry and etcd
 * transaction; a standby applies a group only once its last part arrived,
 * so a leader that dies between two parts leaves nothing half applied.
 *
 * An entry's value: 1 byte of flags (bit 0: more parts follow), 6 bytes of
 * the group's first sequence number (big-endian), then the part's bytes.
 */

/** PART_BYTES bounds the bytes of one log entry: one etcd request holds one entry and stays below etcd's default limit of 1.5 MiB. */
export const PART_BYTES = 1_000_000;

const HEADER_BYTES = 7;
const MORE = 1;

/** LogPart is one decoded log entry. */
export interface LogPart {
  /** first is the sequence number of the group's first part; a part with first === its own seq starts a group. */
  readonly first: number;
  /** more is true while parts of the group follow. */
  readonly more: boolean;
  readonly bytes: Buffer;
}

const packr = new Packr({ useRecords: false, moreTypes: false });

/** encodeGroup packs the changes of one group commit (CHANGE_FORMATS' log tuples). */
export function encodeGroup(changes: readonly Change[]): Buffer {
  const namespaces: string[] = [];
  const index = new Map<string, number>();
  const indexOf = (name: string) => {
    let i = index.get(name);
    if (i === undefined) {
      i = namespaces.push(name) - 1;
      index.set(name, i);
    }
    return i;
  };
  const tuples = changes.map((c) => {
    const format = formatOf(c);
    return [format.tag, indexOf(c.namespace), ...format.log(c)];
  });
  return packr.pack([namespaces, tuples]);
}

/** decodeGroup unpacks a group's changes; it throws on bytes that encodeGroup did not make. */
export function decodeGroup(bytes: Buffer): Change[] {
  const [namespaces, tuples] = packr.unpack(bytes) as [string[], LogField[][]];
  return tuples.map((t) => {
    const format = FORMAT_BY_TAG.get(t[0] as number);
    if (format === undefined) throw new Error(`log record of unknown kind ${String(t[0])}`);
    return format.fromLog(t, namespaces[t[1] as number]!);
  });
}

/** splitGroup cuts a group's bytes into the values of its log entries, the first of which gets sequence number `first`. */
export function splitGroup(bytes: Buffer, first: number): Buffer[] {
  const parts: Buffer[] = [];
  for (let at = 0; at < bytes.length || parts.length === 0; at += PART_BYTES) {
    const chunk = bytes.subarray(at, at + PART_BYTES);
    const value = Buffer.allocUnsafe(HEADER_BYTES + chunk.length);
    value[0] = at + PART_BYTES < bytes.length ? MORE : 0;
    value.writeUIntBE(first, 1, 6);
    chunk.copy(value, HEADER_BYTES);
    parts.push(value);
  }
  return parts;
}

/** decodePart reads a log entry's value. */
export function decodePart(value: Buffer): LogPart {
  if (value.length < HEADER_BYTES) throw new Error(`log entry of ${value.length} bytes is shorter than its header`);
  return { first: value.readUIntBE(1, 6), more: (value[0]! & MORE) !== 0, bytes: value.subarray(HEADER_BYTES) };
}

/**
 * GroupAssembler joins parts into groups, in sequence order. A part that
 * starts a group drops any unfinished one: its leader died between parts,
 * and acknowledged none of it.
 */
export class GroupAssembler {
  private first = -1;
  private chunks: Buffer[] = [];

  /** add takes the part of sequence number `seq`; it returns the group's changes when the part completes it, else undefined. */
  add(seq: number, part: LogPart): Change[] | undefined {
    if (part.first === seq) {
      this.first = seq;
      this.chunks = [];
    } else if (part.first !== this.first) {
      return undefined; // a later part of a group whose start was dropped
    }
    this.chunks.push(part.bytes);
    if (part.more) return undefined;
    const bytes = this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks);
    this.first = -1;
    this.chunks = [];
    return decodeGroup(bytes);
  }
}
