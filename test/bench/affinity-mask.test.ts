import { spawn } from "node:child_process";
import { availableParallelism } from "node:os";
import { describe, expect, it } from "vitest";
import { affinityMask, pinToCore, setAffinityMask } from "../../bench/harness/cpu-affinity.js";

// The standby-reads probe pins this process to one core and gives it its mask back from affinityMask: read wrong, every bench
// after it ran on one core (the quick bench's shard-scale said "1 cores" on 2).
describe.skipIf(availableParallelism() < 2)("cpu-affinity", () => {
  it("reads the mask taskset set, and taskset takes it back", () => {
    const child = spawn("sleep", ["30"]);
    try {
      const pid = child.pid!;
      const all = affinityMask(pid);
      pinToCore(pid, 1);
      expect(affinityMask(pid)).toBe("2");
      setAffinityMask(pid, all);
      expect(affinityMask(pid)).toBe(all);
      expect(Number.parseInt(all, 16).toString(2).replaceAll("0", "").length).toBe(availableParallelism());
    } finally {
      child.kill();
    }
  });
});
