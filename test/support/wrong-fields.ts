import fc from "fast-check";

/**
 * wrongFields are the fields of a request of any method, well formed on
 * the wire and wrong in their values: empty, long (65 bytes) and repeated
 * keys drawn from `keys`, negative and huge pages, parallel fields of
 * unequal lengths, a namespace holding U+001F, ranks not initialized.
 */
export function wrongFields(keys: readonly string[]) {
  const key = fc.oneof(fc.constantFrom(...keys, "", "k".repeat(65)), fc.string({ maxLength: 3 }));
  const page = fc.oneof(fc.integer({ min: -2, max: 70 }), fc.constantFrom(-(2 ** 31), 2 ** 31 - 1));
  return fc.record(
    {
      namespace: fc.constantFrom("", "kv", "m", "a\u001fb"),
      rank: fc.constantFrom(0, 1, 5),
      keys: fc.array(key, { maxLength: 24 }),
      prefixKeys: fc.array(key, { maxLength: 24 }),
      pages: fc.array(page, { maxLength: 24 }),
      pagesToRelease: fc.array(page, { maxLength: 6 }),
      keysToRelease: fc.array(key, { maxLength: 6 }),
      numPages: fc.constantFrom(0, 1, 16, 64, 2 ** 32 - 1),
      worldSize: fc.constantFrom(0, 1, 2),
    },
    { requiredKeys: [] },
  );
}
