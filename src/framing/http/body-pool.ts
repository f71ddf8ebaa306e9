/** The sizes pooled: a power of two from 16 KiB (smaller bodies come in one chunk, or cost little) to 4 MiB (larger ones are rare). */
const MIN_SHIFT = 14;
const MAX_SHIFT = 22;

/**
 * BodyPool keeps the buffers that request bodies of several chunks are
 * joined into, for the calls that come next (internal to the edge). Why:
 * a fresh buffer per body is memory outside V8's heap, and V8 collects the
 * old space by how much of that was allocated, so joined bodies of tens of
 * KiB cost a full collection every few hundred calls (bench/README.md).
 * A buffer goes back with give() when its call ends: by then nothing may
 * hold a view of it (the core copies what it keeps; see edge.ts).
 */
export class BodyPool {
  /** free[k] holds unused buffers of 2^(MIN_SHIFT + k) bytes. */
  private readonly free: Buffer[][] = Array.from({ length: MAX_SHIFT - MIN_SHIFT + 1 }, () => []);
  private freeBytes = 0;

  /** maxFreeBytes bounds what the pool keeps unused; a buffer given back past it is left to the collector. */
  constructor(private readonly maxFreeBytes = 32 << 20) {}

  /**
   * join copies chunks, `total` bytes in all, into a pooled buffer; it
   * returns the body (a view of `backing`), or undefined when the body is
   * too large to pool.
   */
  join(chunks: readonly Buffer[], total: number): { body: Buffer; backing: Buffer } | undefined {
    const shift = Math.max(MIN_SHIFT, 32 - Math.clz32(total - 1));
    if (shift > MAX_SHIFT) return undefined;
    let backing = this.free[shift - MIN_SHIFT]!.pop();
    if (backing === undefined) backing = Buffer.allocUnsafeSlow(1 << shift);
    else this.freeBytes -= backing.length;
    let at = 0;
    for (const chunk of chunks) at += chunk.copy(backing, at);
    return { body: backing.subarray(0, total), backing };
  }

  /** give returns a buffer join made, once its body is no longer read. */
  give(backing: Buffer): void {
    if (this.freeBytes + backing.length > this.maxFreeBytes) return;
    this.free[31 - Math.clz32(backing.length) - MIN_SHIFT]!.push(backing);
    this.freeBytes += backing.length;
  }
}
