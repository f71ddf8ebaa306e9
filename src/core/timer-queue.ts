/** Timer is something that must happen at `atMs` (ms since the epoch). */
export interface Timer {
  atMs: number;
}

/**
 * TimerQueue is a binary min-heap of timers by `atMs`: push and pop are
 * O(log n). Timers are never removed early; whoever pops one checks that it
 * still applies (lazy deletion), which keeps every state change O(1).
 */
export class TimerQueue<T extends Timer> {
  private readonly heap: T[] = [];

  get size(): number {
    return this.heap.length;
  }

  /** push adds a timer. */
  push(timer: T): void {
    const heap = this.heap;
    let i = heap.push(timer) - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (heap[parent]!.atMs <= timer.atMs) break;
      heap[i] = heap[parent]!;
      i = parent;
    }
    heap[i] = timer;
  }

  /** peek returns the earliest timer without removing it. */
  peek(): T | undefined {
    return this.heap[0];
  }

  /** popDue removes and returns the earliest timer if it is due at nowMs, else undefined. */
  popDue(nowMs: number): T | undefined {
    const heap = this.heap;
    const top = heap[0];
    if (top === undefined || top.atMs > nowMs) return undefined;
    const last = heap.pop()!;
    if (heap.length > 0) this.siftDown(last);
    return top;
  }

  private siftDown(timer: T): void {
    const heap = this.heap;
    const n = heap.length;
    let i = 0;
    for (;;) {
      let child = 2 * i + 1;
      if (child >= n) break;
      if (child + 1 < n && heap[child + 1]!.atMs < heap[child]!.atMs) child++;
      if (heap[child]!.atMs >= timer.atMs) break;
      heap[i] = heap[child]!;
      i = child;
    }
    heap[i] = timer;
  }
}
