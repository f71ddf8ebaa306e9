import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // A test's timeout guards against a hang, not a pace: the CPU-bound tests without one of their own take several times
    // as long beside the suite's process tests on a slow day.
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
