import { execFileSync, spawn } from "node:child_process";
import { availableParallelism } from "node:os";
import { describe, expect, it } from "vitest";
import { affinityMask } from "../../bench/probes/standby-reads.js";

// The standby-reads probe pins this process to one core and gives it its mask back from affinityMask: read wrong, every bench
// after it ran on one core (the quick bench's shard-scale said "1 cores" on 2).
describe.skipIf(availableParallelism() < 2)("affinityMask", () => {
  it("reads the mask taskset set, and taskset takes it back", () => {
    const child = spawn("sleep", ["30"]);
    try {
      const pid = String(child.pid);
      const all = affinityMask(child.pid!);
      execFileSync("taskset", ["-pc", "1", pid]);
      expect(affinityMask(child.pid!)).toBe("2");
      execFileSync("taskset", ["-p", all, pid]);
      expect(affinityMask(child.pid!)).toBe(all);
      expect(Number.parseInt(all, 16).toString(2).replaceAll("0", "").length).toBe(availableParallelism());
    } finally {
      child.kill();
    }
  });
});
