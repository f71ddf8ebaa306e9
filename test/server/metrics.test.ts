import perfHooks from "node:perf_hooks";
import { Registry } from "prom-client";
import { describe, expect, it, vi } from "vitest";
import { KeyScope, MetadataState } from "../../src/core/state.js";
import { collectProcessMetrics, Metrics } from "../../src/server/metrics.js";
import { metricsSnapshot, OTHER } from "../../src/server/metrics-snapshot.js";
import { FakeClock } from "../support/fake-clock.js";

function stateWith(namespaces: number, ranksEach: number): MetadataState {
  const state = new MetadataState(new FakeClock().clock, { maxNamespaces: namespaces });
  for (let n = 0; n < namespaces; n++) {
    for (let r = 0; r < ranksEach; r++) state.initializeRank(`ns-${n}`, r, 10, ranksEach);
    const { pages } = state.batchAllocate(`ns-${n}`, 0, ["a", "b"]);
    state.confirmWrite(`ns-${n}`, 0, ["a"], [pages[0]!]);
  }
  return state;
}

describe("the metrics of a scrape", () => {
  it("report a namespace whose ranks keep their own keys as one series, under its name", () => {
    const state = new MetadataState(new FakeClock().clock);
    for (const rank of [0, 1]) {
      state.initializeRank("sg", rank, 10, 0, { keyScope: KeyScope.RANK });
      const { pages } = state.batchAllocate("sg", rank, ["a"]);
      state.confirmWrite("sg", rank, ["a"], pages);
    }
    const series = metricsSnapshot(state);
    expect(series.map((s) => [s.namespace, s.counts.keys, s.counts.completeKeys, s.ranks.map((r) => r.rank)])).toEqual([["sg", 2, 2, ["0", "1"]]]);
  });

  it("report namespaces each within the limits and sum the rest under _other", () => {
    const series = metricsSnapshot(stateWith(5, 3), { namespaces: 2, ranks: 100 });
    expect(series.map((s) => s.namespace)).toEqual(["ns-0", "ns-1", OTHER]);
    expect(series[0]!.ranks).toEqual([
      { rank: "0", free: 8, reserved: 1, used: 1 },
      { rank: "1", free: 10, reserved: 0, used: 0 },
      { rank: "2", free: 10, reserved: 0, used: 0 },
    ]);
    expect(series[2]).toEqual({
      namespace: OTHER,
      counts: {
        keys: 3,
        completeKeys: 0,
        evictions: 0,
        orphanEvictions: 0,
        leafEvictions: 0,
        lruEvictions: 0,
        inlineEvictions: 0,
        expiredReservations: 0,
        reclaimedIncompleteKeys: 0,
      },
      ranks: [{ rank: OTHER, free: 3 * 28, reserved: 3, used: 3 }],
    });
  });

  it("count ranks against their own limit", () => {
    const series = metricsSnapshot(stateWith(3, 4), { namespaces: 10, ranks: 9 });
    expect(series.map((s) => [s.namespace, s.ranks.length])).toEqual([
      ["ns-0", 4],
      ["ns-1", 4],
      [OTHER, 1],
    ]);
  });

  it("stay the same size whatever the number of namespaces", async () => {
    const sizeWith = async (namespaces: number) => (await new Metrics(() => stateWith(namespaces, 1)).registry.metrics()).length;
    const small = await sizeWith(120);
    expect(await sizeWith(2_000)).toBeLessThan(small * 1.05);
  });
});

describe("the process metrics", () => {
  it("sample the event loop's lag every 100 ms, not at prom-client's 10 ms, which woke an idle process 100 times a second", async () => {
    const monitor = vi.spyOn(perfHooks, "monitorEventLoopDelay");
    try {
      const registry = new Registry();
      collectProcessMetrics(registry);
      expect(monitor).toHaveBeenCalledWith(expect.objectContaining({ resolution: 100 }));
      expect(await registry.metrics()).toMatch(/^nodejs_eventloop_lag_p99_seconds /m);
    } finally {
      monitor.mockRestore();
    }
  });
});
