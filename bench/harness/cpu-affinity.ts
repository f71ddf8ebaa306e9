// CPU affinity of a process through util-linux's taskset: the standby-reads probe pins the leader apart from everything else.
import { execFileSync } from "node:child_process";

/** pinToCore puts a process on one core. */
export function pinToCore(pid: number, core: number): void {
  execFileSync("taskset", ["-pc", String(core), String(pid)]);
}

/** affinityMask is a process's CPU mask in hex, as `taskset -p` prints it and setAffinityMask takes it. */
export function affinityMask(pid: number): string {
  const mask = /affinity mask: ([0-9a-f]+)/.exec(execFileSync("taskset", ["-p", String(pid)], { encoding: "utf8" }))?.[1];
  if (mask === undefined) throw new Error(`taskset -p ${pid}: no affinity mask in its output`);
  return mask;
}

/** setAffinityMask gives a process a mask that affinityMask read. */
export function setAffinityMask(pid: number, mask: string): void {
  execFileSync("taskset", ["-p", mask, String(pid)]);
}
