import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // A test's timeout guards against a hang, not a pace: CPU-bound tests take 12 s alone on this project's 2 cores
    // (key-table's longest), and two to three times that beside the suite's process tests on a slow day.
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
