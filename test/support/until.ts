/**
 * until polls `ok` every `everyMs` until it holds (an error counts as not
 * yet), and gives the ms it took; it fails after `timeoutMs`. For what real
 * processes do in their own time, never for a clock a test can advance.
 */
export async function until(ok: () => Promise<boolean> | boolean, timeoutMs = 20_000, everyMs = 20): Promise<number> {
  const started = Date.now();
  while (
    !(await Promise.resolve()
      .then(ok)
      .catch(() => false))
  ) {
    if (Date.now() - started > timeoutMs) throw new Error(`not within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
  return Date.now() - started;
}
