import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { afterEach } from "vitest";

const PYTHON = "/usr/bin/python3";
const POLICY_CLIENT = new URL("../../bench/harness/vllm_policy_client.py", import.meta.url).pathname;
const ENGINE = new URL("../../bench/harness/vllm_engine.py", import.meta.url).pathname;

/** Summary is what the vLLM-policy worker reports once its stdin closes. */
export interface WorkerSummary {
  calls: number;
  errors: string[];
  confirmed: number;
  lost: number;
  longestCallSeconds: number;
}

/** EngineSummary is what a process of vllm_engine.py reports once its stdin closes: a worker its confirmed keys, the scheduler its turns. */
export interface EngineSummary {
  calls: number;
  errors: string[];
  confirmed?: string[];
  turns?: number;
}

/**
 * PythonLoop is a running Python client that loops until its stdin closes,
 * printing {"steps": N} as it goes and one summary line at the end
 * (vllm_policy_client.py, vllm_engine.py).
 */
export class PythonLoop<Summary> {
  private steps = 0;
  private readonly waiters: (() => void)[] = [];
  private readonly summary: Promise<Summary>;
  private stderr = "";

  constructor(private readonly child: ChildProcessWithoutNullStreams) {
    child.stderr.on("data", (d) => (this.stderr += d));
    this.summary = new Promise((resolve, reject) => {
      createInterface({ input: child.stdout }).on("line", (line) => {
        const event = JSON.parse(line) as { steps?: number } & Summary;
        if (event.steps !== undefined) {
          this.steps = event.steps;
          for (const waiter of this.waiters.splice(0)) waiter();
        } else resolve(event);
      });
      child.on("exit", (code) => reject(new Error(`the client exited with ${code}: ${this.stderr}`)));
    });
    this.summary.catch(() => undefined); // its failure reaches whoever waits for progress or stop
  }

  /** start runs `script` with args under Debian's python3. */
  static start<Summary>(script: string, args: string[]): PythonLoop<Summary> {
    const loop = new PythonLoop<Summary>(spawn(PYTHON, [script, ...args]));
    loops.add(loop);
    return loop;
  }

  /** progress resolves once the client made `n` more turns of its loop; it rejects if the client ends first. */
  async progress(n: number): Promise<void> {
    const target = this.steps + n;
    const ended = this.summary.then(() => Promise.reject(new Error("the client ended")));
    while (this.steps < target) await Promise.race([new Promise<void>((resolve) => this.waiters.push(resolve)), ended]);
  }

  /** stop ends the loop (closes its stdin) and returns the summary. */
  stop(): Promise<Summary> {
    this.child.stdin.end();
    return this.summary;
  }

  kill(): void {
    this.child.kill("SIGKILL");
  }
}

/** VllmWorker is a running vllm_policy_client.py: the vLLM JSON routes with vLLM's client retry policy (see the script). */
export type VllmWorker = PythonLoop<WorkerSummary>;

export const VllmWorker = {
  /** start runs the worker against url: it initializes `ranks` ranks with numPages and samples `known` stored keys (0: none). */
  start(url: string, ranks: number, numPages: number, known: number): VllmWorker {
    return PythonLoop.start<WorkerSummary>(POLICY_CLIENT, [url, String(ranks), String(numPages), String(known)]);
  },
};

/**
 * VllmEngine is vLLM's call pattern in separate processes (vllm_engine.py):
 * a scheduler whose keep-alive connection sits idle between its
 * BatchExists calls, and one worker per tensor-parallel rank, each with its
 * own connection, writing the same keys on its own rank.
 */
export class VllmEngine {
  private constructor(
    readonly scheduler: PythonLoop<EngineSummary>,
    readonly workers: PythonLoop<EngineSummary>[],
  ) {}

  /** start runs the engine against url with `ranks` workers of numPages each; the scheduler asks every idleSeconds. */
  static start(url: string, ranks: number, numPages: number, idleSeconds = 3): VllmEngine {
    const workers = Array.from({ length: ranks }, (_, rank) => PythonLoop.start<EngineSummary>(ENGINE, [url, "worker", String(rank), String(numPages)]));
    return new VllmEngine(PythonLoop.start<EngineSummary>(ENGINE, [url, "scheduler", String(idleSeconds)]), workers);
  }

  /** progress resolves once every worker made `n` more turns and the scheduler one more call. */
  async progress(n: number): Promise<void> {
    await Promise.all([...this.workers.map((w) => w.progress(n)), this.scheduler.progress(1)]);
  }

  /** stop ends every process and returns their errors, each prefixed by who met it, and the keys every worker confirmed. */
  async stop(): Promise<{ errors: string[]; complete: string[]; calls: number }> {
    const [scheduler, ...workers] = await Promise.all([this.scheduler.stop(), ...this.workers.map((w) => w.stop())]);
    const errors = [...scheduler!.errors.map((e) => `scheduler: ${e}`), ...workers.flatMap((w, rank) => w.errors.map((e) => `worker ${rank}: ${e}`))];
    const everywhere = workers.map((w) => new Set(w.confirmed));
    const complete = [...everywhere[0]!].filter((key) => everywhere.every((keys) => keys.has(key)));
    return { errors, complete, calls: scheduler!.calls + workers.reduce((sum, w) => sum + w.calls, 0) };
  }
}

const loops = new Set<PythonLoop<unknown>>();
afterEach(() => {
  for (const loop of loops) loop.kill();
  loops.clear();
});
