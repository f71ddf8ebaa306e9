import { readdirSync, readFileSync } from "node:fs";

/**
 * pause stops a process (SIGSTOP) and resolves once every one of its
 * threads is stopped: the signal stops a running thread only when it is
 * next interrupted, which on a busy machine may come after a request the
 * test sends next, and get that request answered.
 */
export async function pause(pid: number): Promise<void> {
  process.kill(pid, "SIGSTOP");
  const deadline = performance.now() + 5_000;
  while (!allStopped(pid)) {
    if (performance.now() > deadline) throw new Error(`process ${pid} did not stop within 5 s of SIGSTOP`);
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
}

/** allStopped is true when every thread of pid is in state T (stopped) by /proc. */
function allStopped(pid: number): boolean {
  return readdirSync(`/proc/${pid}/task`).every((tid) => {
    const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, "utf8");
    return /^[tT]$/.test(stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3));
  });
}
