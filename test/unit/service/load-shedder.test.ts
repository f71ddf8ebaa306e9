import { describe, expect, it } from "vitest";
import { loopLagSampler } from "../../../src/service/load-shedder.js";

describe("loopLagSampler", () => {
  it("reads how far the event loop is behind while it is blocked, and about nothing once it turns again", async () => {
    const lag = loopLagSampler(5);
    try {
      await new Promise((resolve) => setTimeout(resolve, 20));
      const blockedUntil = performance.now() + 60;
      while (performance.now() < blockedUntil); // the loop is busy: the sampler's timer is overdue
      expect(lag.sample()).toBeGreaterThanOrEqual(50);
      await new Promise((resolve) => setTimeout(resolve, 30));
      expect(lag.sample()).toBeLessThan(30);
    } finally {
      lag.stop();
    }
  });
});
