/** Column is a typed array that the core keeps one value per item in. */
export type Column = Int32Array | Int16Array | Uint16Array | Uint8Array | Float64Array;

/**
 * grownCapacity is the next size of a column of `current` items that must
 * hold `needed`: half again, at least `least`. Not double: the key table's
 * buckets double at powers of two, and growths that coincided with them
 * would add up to one long pause (bench/probes/growth-probe.ts).
 */
export function grownCapacity(current: number, needed: number, least = 64): number {
  let capacity = Math.max(least, Math.ceil(current * 1.5));
  while (capacity < needed) capacity = Math.ceil(capacity * 1.5);
  return capacity;
}

/** grown is `from` copied into a new typed array of the same kind with `capacity` elements, the rest zero. */
export function grown<T extends Column>(from: T, capacity: number): T {
  const to = new (from.constructor as new (length: number) => T)(capacity);
  to.set(from as ArrayLike<number> as never);
  return to;
}

/**
 * EMPTY holds one column of no elements of each kind, shared by every
 * column that has not grown yet (an empty rank costs no typed array of its
 * own: 1,048,576 ranks of empty columns took gigabytes). Nothing can be
 * written to an array of no elements; grown() makes a column of its own.
 */
export const EMPTY = {
  int32: new Int32Array(0),
  uint8: new Uint8Array(0),
  float64: new Float64Array(0),
} as const;
