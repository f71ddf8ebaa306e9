/** Column is a typed array that the core keeps one value per item in. */
export type Column = Int32Array | Int16Array | Uint16Array | Uint8Array | Float64Array;

/**
 * grownCapacity is the next size of a column of `current` items that must
 * hold `needed`: half again, at least `least`. Not double: the key table's
 * buckets double at powers of two, and growths that coincided with them
 * would add up to one long pause (bench/growth-probe.ts).
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
