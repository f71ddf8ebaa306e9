import type * as http from "node:http";
import { Gauge, Registry } from "prom-client";
import { describe, expect, it } from "vitest";
import { serveMetrics } from "../../../src/server/metrics-endpoint.js";

/** answer is a response that records what was written. */
function answer() {
  const seen = { status: 0, body: "" };
  const res = {
    writeHead(status: number) {
      seen.status = status;
    },
    end(body: string) {
      seen.body = body;
    },
  } as unknown as http.ServerResponse;
  return { seen, res };
}

describe("GET /metrics (serveMetrics)", () => {
  it("answers 500 naming the cause when a collector throws, and the process goes on", async () => {
    const registry = new Registry();
    new Gauge({
      name: "broken",
      help: "throws at scrape time",
      registers: [registry],
      collect() {
        throw new Error("It is not possible to decrease a counter");
      },
    });
    const { seen, res } = answer();
    await serveMetrics(registry, undefined, undefined, res);
    expect(seen).toEqual({ status: 500, body: "metrics could not be collected: It is not possible to decrease a counter\n" });
  });
});
