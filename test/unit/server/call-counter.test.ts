import { Counter, Registry } from "prom-client";
import { describe, expect, it } from "vitest";
import { CallCounter } from "../../../src/server/call-counter.js";

describe("CallCounter", () => {
  it("shows, at every scrape, the counts prom-client's own inc per call would show", async () => {
    const [ours, theirs] = [new Registry(), new Registry()];
    const counter = new CallCounter(ours, "calls_total", "Calls.");
    const reference = new Counter({ name: "calls_total", help: "Calls.", labelNames: ["method", "code"], registers: [theirs] });
    const calls = [
      ["BatchExists", "ok"],
      ["BatchExists", "ok"],
      ["ConfirmWrite", "FAILED_PRECONDITION"],
      ["BatchExists", "UNAVAILABLE"],
    ] as const;
    for (const round of [1, 2, 3]) {
      for (const [method, code] of calls.slice(0, round + 1)) {
        counter.count(method, code);
        reference.inc({ method, code });
      }
      expect(await ours.metrics()).toBe(await theirs.metrics());
    }
    expect(await ours.getSingleMetricAsString("calls_total")).toContain('calls_total{method="BatchExists",code="ok"} 6');
  });
});
