import type { Change, ParentName } from "./change.js";

/** ChangeKind names a kind of durable change. */
export type ChangeKind = Change["kind"];
/** ChangeOf is the change of one kind. */
export type ChangeOf<K extends ChangeKind> = Extract<Change, { kind: K }>;
/** LogField is a field of a log tuple (msgpack). */
export type LogField = string | number | number[] | null;
/**
 * StoreTable is a table of the store that holds changes' records
 * (schema.ts); "keys" stands for long_keys too, and "namespace" for every
 * record of one namespace (a drop removes them all).
 */
export type StoreTable = "ranks" | "keys" | "reservations" | "drains" | "namespace";
/** RecordKey and RecordValue are a store record's key and value (ordered-binary and msgpack arrays). */
export type RecordKey = (string | number)[];
export type RecordValue = (string | number | null)[];

/**
 * KindFormat is how one kind of change is written: in the replicated log
 * (a tuple: its tag, its namespace's index, then `log`'s fields) and in the
 * store (a record of `table`, put by a kind with a `value`, removed by the
 * other kind of its table).
 */
export interface KindFormat<K extends ChangeKind> {
  /** tag names the kind in the log's tuples; a tag is never reused. */
  readonly tag: number;
  /** log lists the change's fields as the log's tuple holds them after its tag and namespace. */
  log(c: ChangeOf<K>): LogField[];
  /** fromLog reads a tuple back (its fields from t[2] on; fields an older leader did not write are missing). */
  fromLog(t: readonly LogField[], namespace: string): ChangeOf<K>;
  /** table is the store table of the kind's records. */
  readonly table: StoreTable;
  /** key is the key of the record the change puts or removes. */
  key(c: ChangeOf<K>): RecordKey;
  /** value is the record the change puts; absent for a kind that removes its record. */
  value?(c: ChangeOf<K>): RecordValue;
  /** read gives a stored record back as its change (the kinds that put). */
  read?(key: RecordKey, value: RecordValue): ChangeOf<K>;
}

/**
 * CHANGE_FORMATS is every kind of durable change, with both of its
 * encodings: adding a kind is a row here and its apply in recovery.ts.
 * A format read by a released server only grows at its end (the log reads
 * missing trailing fields as their old meaning; a store layout change
 * needs a FORMAT_VERSION and its migration, schema.ts).
 */
/** withLayout gives a rank change the layout a record carries at its end, if any (records from before layouts have none). */
function withLayout(change: Extract<Change, { kind: "rank" }>, layout: unknown): Extract<Change, { kind: "rank" }> {
  return typeof layout === "string" ? { ...change, layout } : change;
}

export const CHANGE_FORMATS: { readonly [K in ChangeKind]: KindFormat<K> } = {
  rank: {
    tag: 0,
    log: (c) => (c.layout === undefined ? [c.rank, c.numPages, c.worldSize] : [c.rank, c.numPages, c.worldSize, c.layout]),
    fromLog: (t, namespace) => withLayout({ kind: "rank", namespace, rank: t[2] as number, numPages: t[3] as number, worldSize: t[4] as number }, t[5]),
    table: "ranks",
    key: (c) => [c.namespace, c.rank],
    value: (c) => (c.layout === undefined ? [c.numPages, c.worldSize] : [c.numPages, c.worldSize, c.layout]),
    read: ([namespace, rank], [numPages, worldSize, layout]) =>
      withLayout({ kind: "rank", namespace: namespace as string, rank: rank as number, numPages: numPages as number, worldSize: worldSize as number }, layout),
  },
  unrank: {
    tag: 7,
    log: (c) => [c.rank],
    fromLog: (t, namespace) => ({ kind: "unrank", namespace, rank: t[2] as number }),
    table: "ranks",
    key: (c) => [c.namespace, c.rank],
  },
  reserve: {
    tag: 1,
    log: (c) => [c.rank, c.page, c.key, c.expiresAtMs, c.parent],
    fromLog: (t, namespace) => ({
      kind: "reserve",
      namespace,
      rank: t[2] as number,
      page: t[3] as number,
      key: t[4] as string,
      parent: parentOf(t[6]),
      expiresAtMs: t[5] as number,
    }),
    table: "reservations",
    key: (c) => [c.namespace, c.rank, c.page],
    value: (c) => [c.key, c.expiresAtMs, c.parent],
    // Before version 3 a reservation had no parent: a root.
    read: ([namespace, rank, page], [key, expiresAtMs, parent]) => ({
      kind: "reserve",
      namespace: namespace as string,
      rank: rank as number,
      page: page as number,
      key: key as string,
      parent: parentOf(parent),
      expiresAtMs: expiresAtMs as number,
    }),
  },
  unreserve: {
    tag: 2,
    // A confirmation's unreserve ends with 1 (its key record follows); any other with nothing.
    log: (c) => (c.confirmed ? [c.rank, c.page, 1] : [c.rank, c.page]),
    fromLog: (t, namespace) =>
      t[4] === 1
        ? { kind: "unreserve", namespace, rank: t[2] as number, page: t[3] as number, confirmed: true }
        : { kind: "unreserve", namespace, rank: t[2] as number, page: t[3] as number },
    table: "reservations",
    key: (c) => [c.namespace, c.rank, c.page],
  },
  key: {
    tag: 3,
    log: (c) => [c.key, c.complete ? 1 : 0, c.pages, c.parent],
    fromLog: (t, namespace) => ({ kind: "key", namespace, key: t[2] as string, parent: parentOf(t[5]), complete: t[3] === 1, pages: t[4] as number[] }),
    table: "keys",
    key: (c) => [c.namespace, c.key],
    value: (c) => [c.complete ? 1 : 0, c.parent, ...c.pages],
    // Before version 3 a key record had no parent: a page (a number), or nothing, follows `complete` (isPreParentKeyValue).
    read: ([namespace, key], value) => {
      const parented = !isPreParentKeyValue(value);
      const pages = value.slice(parented ? 2 : 1) as number[];
      return {
        kind: "key",
        namespace: namespace as string,
        key: key as string,
        parent: parented ? (value[1] as ParentName) : "",
        complete: value[0] === 1,
        pages,
      };
    },
  },
  forget: {
    tag: 4,
    log: (c) => [c.key],
    fromLog: (t, namespace) => ({ kind: "forget", namespace, key: t[2] as string }),
    table: "keys",
    key: (c) => [c.namespace, c.key],
  },
  drain: {
    tag: 5,
    log: (c) => [c.rank, c.page, c.key, c.untilMs],
    fromLog: (t, namespace) => ({ kind: "drain", namespace, rank: t[2] as number, page: t[3] as number, key: t[4] as string, untilMs: t[5] as number }),
    table: "drains",
    key: (c) => [c.namespace, c.rank, c.page],
    value: (c) => [c.key, c.untilMs],
    read: ([namespace, rank, page], [key, untilMs]) => ({
      kind: "drain",
      namespace: namespace as string,
      rank: rank as number,
      page: page as number,
      key: key as string,
      untilMs: untilMs as number,
    }),
  },
  undrain: {
    tag: 6,
    log: (c) => [c.rank, c.page],
    fromLog: (t, namespace) => ({ kind: "undrain", namespace, rank: t[2] as number, page: t[3] as number }),
    table: "drains",
    key: (c) => [c.namespace, c.rank, c.page],
  },
  drop: {
    tag: 8,
    log: () => [],
    fromLog: (_t, namespace) => ({ kind: "drop", namespace }),
    table: "namespace",
    key: (c) => [c.namespace],
  },
};

/** formatOf is the format of a change's kind. */
export function formatOf(change: Change): KindFormat<ChangeKind> {
  return CHANGE_FORMATS[change.kind] as KindFormat<ChangeKind>;
}

/** FORMAT_BY_TAG finds a log tuple's kind by its tag. */
export const FORMAT_BY_TAG: ReadonlyMap<number, KindFormat<ChangeKind>> = new Map(
  Object.values(CHANGE_FORMATS).map((format) => [format.tag, format as KindFormat<ChangeKind>]),
);

/** readerOf is how a store table's records read back: through the kind that puts them. */
export function readerOf(table: Exclude<StoreTable, "namespace">): (key: RecordKey, value: RecordValue) => Change {
  const putter = Object.values(CHANGE_FORMATS).find((format) => format.table === table && format.read !== undefined);
  return putter!.read as (key: RecordKey, value: RecordValue) => Change;
}

/** isPreParentKeyValue tells a key record's value of the layout before version 3: a page (a number), or nothing, after `complete`. */
export function isPreParentKeyValue(value: RecordValue): boolean {
  return value.length === 1 || typeof value[1] === "number";
}

/** parentOf reads a stored or logged parent (ParentName); a record from before parents were kept has none: a root. */
function parentOf(value: LogField | undefined): ParentName {
  return value === undefined ? "" : (value as string | null);
}
