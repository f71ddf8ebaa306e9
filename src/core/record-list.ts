/** Linked is a record that a RecordList can hold: the list writes these fields, nobody else. */
export interface Linked {
  prev: Linked | undefined;
  next: Linked | undefined;
  /** list is the list holding the record, undefined when none. */
  list: RecordList<Linked> | undefined;
}

/**
 * RecordList is an intrusive doubly-linked list in insertion order: add,
 * delete, has and moveToBack are a few pointer writes, with no hashing and
 * no allocation, which matters on the hot path (an LRU touch per key read).
 * A record is in at most one list. It iterates oldest first; the loop body
 * may delete or move the record it is at, nothing else.
 */
export class RecordList<T extends Linked> implements Iterable<T> {
  private head: T | undefined;
  private tail: T | undefined;
  private count = 0;

  get size(): number {
    return this.count;
  }

  /** first is the oldest record, undefined when empty. */
  get first(): T | undefined {
    return this.head;
  }

  has(record: T): boolean {
    return record.list === this;
  }

  /** add appends a record that is in no list. */
  add(record: T): void {
    record.list = this;
    record.prev = this.tail;
    record.next = undefined;
    if (this.tail === undefined) this.head = record;
    else this.tail.next = record;
    this.tail = record;
    this.count++;
  }

  /** delete removes a record of this list; a no-op for any other record. */
  delete(record: T): void {
    if (record.list !== this) return;
    if (record.prev === undefined) this.head = record.next as T | undefined;
    else record.prev.next = record.next;
    if (record.next === undefined) this.tail = record.prev as T | undefined;
    else record.next.prev = record.prev;
    record.prev = record.next = record.list = undefined;
    this.count--;
  }

  /** moveToBack makes a record of this list the newest. */
  moveToBack(record: T): void {
    if (this.tail === record) return;
    this.delete(record);
    this.add(record);
  }

  *[Symbol.iterator](): Iterator<T> {
    for (let record = this.head; record !== undefined; ) {
      const next = record.next as T | undefined;
      yield record;
      record = next;
    }
  }
}
