import { EMPTY, grown } from "./grown.js";

/**
 * Links are the prev/next columns of items numbered from 0 (registry
 * entries, pages), and which list holds each item (0 for none): the fields
 * an intrusive list writes, kept in typed arrays so that an item costs no
 * object. The owner grows them as its items grow; only IndexLists write them.
 */
export class Links {
  prev: Int32Array = EMPTY.int32;
  next: Int32Array = EMPTY.int32;
  list: Uint8Array = EMPTY.uint8;

  /** grow makes room for items below `capacity`; new items are in no list. */
  grow(capacity: number): void {
    if (capacity <= this.list.length) return;
    this.prev = grown(this.prev, capacity);
    this.next = grown(this.next, capacity);
    this.list = grown(this.list, capacity);
  }
}

/** NONE is the item number of no item: an empty list's first, the end of a list. */
export const NONE = -1;

/**
 * IndexList is an intrusive doubly-linked list of item numbers over shared
 * Links, in insertion order: add, delete, has and moveToBack are a few array
 * writes, with no hashing and no allocation, which matters on the hot path
 * (an LRU touch per key read). An item is in at most one of the lists that
 * share its Links; each list has its own id (1 to 255). Iteration is oldest
 * first; the loop body may delete or move the item it is at, nothing else.
 */
export class IndexList implements Iterable<number> {
  private head = NONE;
  private tail = NONE;
  private count = 0;

  constructor(
    private readonly links: Links,
    private readonly id: number,
  ) {}

  get size(): number {
    return this.count;
  }

  /** first is the oldest item, NONE when empty. */
  get first(): number {
    return this.head;
  }

  /** last is the newest item, NONE when empty. */
  get last(): number {
    return this.tail;
  }

  /** after is the item after `item` in this list, NONE at the end. */
  after(item: number): number {
    return this.links.next[item]!;
  }

  /** id is this list's id in the shared Links (Links.list). */
  get listId(): number {
    return this.id;
  }

  has(item: number): boolean {
    return this.links.list[item] === this.id;
  }

  /** add appends an item that is in no list. */
  add(item: number): void {
    const links = this.links;
    links.list[item] = this.id;
    links.prev[item] = this.tail;
    links.next[item] = NONE;
    if (this.tail === NONE) this.head = item;
    else links.next[this.tail] = item;
    this.tail = item;
    this.count++;
  }

  /** addFront prepends an item that is in no list, as the oldest. */
  addFront(item: number): void {
    const links = this.links;
    links.list[item] = this.id;
    links.prev[item] = NONE;
    links.next[item] = this.head;
    if (this.head === NONE) this.tail = item;
    else links.prev[this.head] = item;
    this.head = item;
    this.count++;
  }

  /** delete removes an item of this list; a no-op for any other item. */
  delete(item: number): void {
    const links = this.links;
    if (links.list[item] !== this.id) return;
    const prev = links.prev[item]!;
    const next = links.next[item]!;
    if (prev === NONE) this.head = next;
    else links.next[prev] = next;
    if (next === NONE) this.tail = prev;
    else links.prev[next] = prev;
    links.list[item] = 0;
    this.count--;
  }

  /** moveToBack makes an item of this list the newest. */
  moveToBack(item: number): void {
    if (this.tail === item) return;
    this.delete(item);
    this.add(item);
  }

  *[Symbol.iterator](): Iterator<number> {
    for (let item = this.head; item !== NONE; ) {
      const next = this.links.next[item]!;
      yield item;
      item = next;
    }
  }
}
