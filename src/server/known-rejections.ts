/**
 * tolerateKnownRejections keeps the process alive for the unhandled
 * rejections that one of `known` recognizes: rejections a library makes
 * for itself, which nobody can handle, and whose effect the server deals
 * with elsewhere (see each predicate). Any other unhandled rejection is thrown
 * on, which crashes the process as Node's default does.
 */
export function tolerateKnownRejections(known: readonly ((reason: unknown) => boolean)[]): void {
  process.on("unhandledRejection", (reason) => {
    if (known.some((isKnown) => isKnown(reason))) return;
    throw reason;
  });
}
