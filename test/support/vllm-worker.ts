import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { afterEach } from "vitest";

const PYTHON = "/usr/bin/python3";
const CLIENT = new URL("./vllm_policy_client.py", import.meta.url).pathname;

/** Summary is what the vLLM-policy worker reports once its stdin closes. */
export interface WorkerSummary {
  calls: number;
  errors: string[];
  confirmed: number;
  lost: number;
  longestCallSeconds: number;
}

/** VllmWorker is a running vllm_policy_client.py: the vLLM JSON routes with vLLM's client retry policy (see the script). */
export class VllmWorker {
  private steps = 0;
  private readonly waiters: (() => void)[] = [];
  private readonly summary: Promise<WorkerSummary>;
  private stderr = "";

  constructor(private readonly child: ChildProcessWithoutNullStreams) {
    child.stderr.on("data", (d) => (this.stderr += d));
    this.summary = new Promise((resolve, reject) => {
      createInterface({ input: child.stdout }).on("line", (line) => {
        const event = JSON.parse(line) as { steps?: number } & WorkerSummary;
        if (event.steps !== undefined) {
          this.steps = event.steps;
          for (const waiter of this.waiters.splice(0)) waiter();
        } else resolve(event);
      });
      child.on("exit", (code) => reject(new Error(`the worker exited with ${code}: ${this.stderr}`)));
    });
    this.summary.catch(() => undefined); // its failure reaches whoever waits for progress or stop
  }

  /** start runs the worker against url: it initializes `ranks` ranks with numPages and samples `known` stored keys (0: none). */
  static start(url: string, ranks: number, numPages: number, known: number): VllmWorker {
    const worker = new VllmWorker(spawn(PYTHON, [CLIENT, url, String(ranks), String(numPages), String(known)]));
    workers.add(worker);
    return worker;
  }

  /** progress resolves once the worker made `n` more turns of its loop; it rejects if the worker ends first. */
  async progress(n: number): Promise<void> {
    const target = this.steps + n;
    const ended = this.summary.then(() => Promise.reject(new Error("the worker ended")));
    while (this.steps < target) await Promise.race([new Promise<void>((resolve) => this.waiters.push(resolve)), ended]);
  }

  /** stop ends the loop (closes its stdin) and returns the summary. */
  stop(): Promise<WorkerSummary> {
    this.child.stdin.end();
    return this.summary;
  }

  kill(): void {
    this.child.kill("SIGKILL");
  }
}

const workers = new Set<VllmWorker>();
afterEach(() => {
  for (const worker of workers) worker.kill();
  workers.clear();
});
