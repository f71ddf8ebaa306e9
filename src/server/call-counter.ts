import { Counter, type Registry } from "prom-client";

/** Count is a method's running count of calls with one code. */
interface Count {
  n: number;
}

/**
 * CallCounter counts calls by method and code, a server's or a relay's: a
 * call adds one to a plain number, and the Prometheus counter takes the
 * sums when it is read (a scrape, `counter.get()`). Why not `inc` per
 * call: prom-client hashes and checks the labels of every `inc`, a few
 * percent of a busy server's CPU (one count per call of a Batch).
 */
export class CallCounter {
  readonly counter: Counter<"method" | "code">;
  private readonly counts = new Map<string, Map<string, Count>>();

  constructor(registry: Registry, name: string, help: string) {
    const counts = this.counts;
    this.counter = new Counter({
      name,
      help,
      labelNames: ["method", "code"],
      registers: [registry],
      collect() {
        for (const [method, codes] of counts) {
          for (const [code, count] of codes) {
            if (count.n === 0) continue;
            this.inc({ method, code }, count.n);
            count.n = 0;
          }
        }
      },
    });
  }

  /** count counts one call of method that ended with code ("ok" or a gRPC code name). */
  count(method: string, code: string): void {
    let codes = this.counts.get(method);
    if (codes === undefined) {
      codes = new Map();
      this.counts.set(method, codes);
    }
    const count = codes.get(code);
    if (count === undefined) codes.set(code, { n: 1 });
    else count.n++;
  }
}
