/** Column is a typed array that the core keeps one value per item in. */
export type Column = Int32Array | Int16Array | Uint16Array | Uint8Array | Float64Array;

/** grown is `from` copied into a new typed array of the same kind with `capacity` elements, the rest zero. */
export function grown<T extends Column>(from: T, capacity: number): T {
  const to = new (from.constructor as new (length: number) => T)(capacity);
  to.set(from as ArrayLike<number> as never);
  return to;
}
