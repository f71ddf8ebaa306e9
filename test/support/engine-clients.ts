import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { afterEach } from "vitest";

const PYTHON = "/usr/bin/python3";
const POLICY_CLIENT = new URL("../../bench/harness/vllm_policy_client.py", import.meta.url).pathname;
const ENGINE = new URL("../../bench/harness/vllm_engine.py", import.meta.url).pathname;
const SGLANG_ENGINE = new URL("../../bench/harness/sglang_engine.py", import.meta.url).pathname;

/** Summary is what the vLLM-policy worker reports once its stdin closes. */
export interface WorkerSummary {
  calls: number;
  errors: string[];
  confirmed: number;
  lost: number;
  longestCallSeconds: number;
}

/** EngineSummary is what a process of vllm_engine.py or sglang_engine.py reports once its stdin closes: a writer its confirmed keys, a reader its turns. */
export interface EngineSummary {
  calls: number;
  /** retried counts the calls answered only after urllib3 tried again (a refused connection, a 5xx). */
  retried: number;
  /** refused counts those of them that met a connection refused (no process held the port). */
  refused: number;
  /** unreached counts the reads a relay answered as misses, reaching no server (hf3fs-unreached). */
  unreached: number;
  errors: string[];
  /** longestCallSeconds is the process's longest call, its retries and any wait at the server included. */
  longestCallSeconds: number;
  /** longestCallBegan is when that call began (UTC, to the millisecond), to set beside a test's log of faults. */
  longestCallBegan: string;
  /** longestCallUrl is where that call went. */
  longestCallUrl: string;
  confirmed?: string[];
  turns?: number;
}

/**
 * PythonLoop is a running Python client that loops until its stdin closes,
 * printing {"steps": N} as it goes and one summary line at the end
 * (vllm_policy_client.py, vllm_engine.py, sglang_engine.py).
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

/** EngineRun is what an engine's processes reported once stopped. */
export interface EngineRun {
  /** errors are the calls that failed after the client's retries, and the wrong answers, each prefixed by who met it. */
  errors: string[];
  calls: number;
  /** retried counts the calls answered only after the client tried again, in every process. */
  retried: number;
  /** refused counts those of them that met a connection refused. */
  refused: number;
  /** unreached counts the reads a relay answered as misses, reaching no server, in every process. */
  unreached: number;
  /** longestCallSeconds is the longest call of any of its processes, retries included. */
  longestCallSeconds: number;
  /** longestCall says that call: how long, when it began, who sent it and where. */
  longestCall: string;
  /** stored is how many keys the engine has whole: confirmed on every rank (vLLM), or on its rank by each rank (SGLang). */
  stored: number;
  /** missing asks the server at url for the keys stored and returns those it does not have. */
  missing(url: string): Promise<string[]>;
}

/** Engine is an engine's processes, running against one URL until stopped. */
export interface Engine {
  /** progress resolves once every writer made `n` more turns and every reader one more. */
  progress(n: number): Promise<void>;
  /** readersProgress resolves once every reader (vLLM's scheduler, SGLang's prefetchers) made `n` more turns, whatever the writers do. */
  readersProgress(n: number): Promise<void>;
  stop(): Promise<EngineRun>;
}

/** postJson posts body to url and returns the JSON answer: a server's, asked again while a relay answers that it reached none (hf3fs-unreached), for up to 10 s. */
async function postJson<T>(url: string, body: unknown): Promise<T> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const res = await fetch(url, { method: "POST", body: JSON.stringify(body) });
    if (!res.ok) throw new Error(`${url}: ${res.status} ${await res.text()}`);
    if (res.headers.get("hf3fs-unreached") !== "1") return (await res.json()) as T;
    if (Date.now() > deadline) throw new Error(`${url}: the relay reached no server for 10 s`);
    await res.arrayBuffer();
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** longestOf is the longest call of any of the processes, and what it was. */
function longestOf(processes: [string, EngineSummary][]): Pick<EngineRun, "longestCallSeconds" | "longestCall"> {
  const [who, summary] = processes.reduce((a, b) => (b[1].longestCallSeconds > a[1].longestCallSeconds ? b : a));
  const { longestCallSeconds: seconds, longestCallBegan: began, longestCallUrl: url } = summary;
  return { longestCallSeconds: seconds, longestCall: `${seconds} s, begun ${began} UTC by the ${who} to ${url}` };
}

/** errorsOf is every process's errors, each prefixed by who met it. */
function errorsOf(processes: [string, EngineSummary][]): string[] {
  return processes.flatMap(([who, summary]) => summary.errors.map((e) => `${who}: ${e}`));
}

/**
 * VllmEngine is vLLM's call pattern in separate processes (vllm_engine.py):
 * a scheduler whose keep-alive connection sits idle between its turns
 * (BatchExists, then GetLocations on each rank of the keys that exist), and
 * one worker per tensor-parallel rank, each with its own connection,
 * writing the same keys on its own rank.
 */
export class VllmEngine implements Engine {
  private constructor(
    readonly scheduler: PythonLoop<EngineSummary>,
    readonly workers: PythonLoop<EngineSummary>[],
  ) {}

  /**
   * start initializes the `ranks` ranks of numPages at url, as vLLM's
   * engine has every worker's connector up before it serves a request, then
   * runs the engine: the workers (each initializes its rank again, as a
   * worker does when it starts) and the scheduler, which asks every
   * idleSeconds. Without it, a worker could confirm a key before another
   * rank existed: with vLLM's world_size of 0 (it sends none), that key is
   * complete on the ranks of its time (docs/contract.md), and the scheduler
   * found it on a rank that never had it.
   */
  static async start(url: string, ranks: number, numPages: number, idleSeconds = 3): Promise<VllmEngine> {
    for (let rank = 0; rank < ranks; rank++) await postJson(`${url}/rank/${rank}/initialize`, { num_pages: numPages, role: "worker" });
    const workers = Array.from({ length: ranks }, (_, rank) => PythonLoop.start<EngineSummary>(ENGINE, [url, "worker", String(rank), String(numPages)]));
    return new VllmEngine(PythonLoop.start<EngineSummary>(ENGINE, [url, "scheduler", String(idleSeconds), String(ranks)]), workers);
  }

  async progress(n: number): Promise<void> {
    await Promise.all([...this.workers.map((w) => w.progress(n)), this.scheduler.progress(1)]);
  }

  readersProgress(n: number): Promise<void> {
    return this.scheduler.progress(n);
  }

  /** stop ends every process; the keys it reports stored are those every worker confirmed, asked with vLLM's batch_exists. */
  async stop(): Promise<EngineRun & { complete: string[] }> {
    const [scheduler, ...workers] = await Promise.all([this.scheduler.stop(), ...this.workers.map((w) => w.stop())]);
    const everywhere = workers.map((w) => new Set(w.confirmed));
    const complete = [...everywhere[0]!].filter((key) => everywhere.every((keys) => keys.has(key)));
    const processes: [string, EngineSummary][] = [["scheduler", scheduler!], ...workers.map((w, rank): [string, EngineSummary] => [`worker ${rank}`, w])];
    return {
      errors: errorsOf(processes),
      calls: scheduler!.calls + workers.reduce((sum, w) => sum + w.calls, 0),
      retried: processes.reduce((sum, [, p]) => sum + p.retried, 0),
      refused: processes.reduce((sum, [, p]) => sum + p.refused, 0),
      unreached: processes.reduce((sum, [, p]) => sum + p.unreached, 0),
      ...longestOf(processes),
      stored: complete.length,
      complete,
      async missing(url) {
        const { exists } = await postJson<{ exists: boolean[] }>(`${url}/keys/batch_exists`, { keys: complete });
        return complete.filter((_, i) => !exists[i]);
      },
    };
  }
}

/**
 * SglangEngine is SGLang's call pattern in separate processes
 * (sglang_engine.py): per tensor-parallel rank, a writer storing pages on
 * its rank over SGLang's per-rank routes, and a prefetcher whose keep-alive
 * connection sits idle between its `exists` and `get_page_indices` calls.
 */
export class SglangEngine implements Engine {
  private constructor(
    readonly writers: PythonLoop<EngineSummary>[],
    readonly prefetchers: PythonLoop<EngineSummary>[],
  ) {}

  /** start runs the engine against url with `ranks` ranks of numPages each (enough that none evicts: see sglang_engine.py); each prefetcher asks every idleSeconds. */
  static start(url: string, ranks: number, numPages: number, idleSeconds = 3): SglangEngine {
    const each = (role: string, ...rest: string[]) =>
      Array.from({ length: ranks }, (_, rank) => PythonLoop.start<EngineSummary>(SGLANG_ENGINE, [url, role, String(rank), String(numPages), ...rest]));
    return new SglangEngine(each("writer"), each("prefetcher", String(idleSeconds)));
  }

  async progress(n: number): Promise<void> {
    await Promise.all([...this.writers.map((w) => w.progress(n)), ...this.prefetchers.map((p) => p.progress(1))]);
  }

  async readersProgress(n: number): Promise<void> {
    await Promise.all(this.prefetchers.map((p) => p.progress(n)));
  }

  /** stop ends every process; the keys it reports stored are each writer's, asked of its rank with SGLang's exists. */
  async stop(): Promise<EngineRun> {
    const [writers, prefetchers] = await Promise.all([Promise.all(this.writers.map((w) => w.stop())), Promise.all(this.prefetchers.map((p) => p.stop()))]);
    const processes = [
      ...writers.map((w, rank): [string, EngineSummary] => [`writer ${rank}`, w]),
      ...prefetchers.map((p, rank): [string, EngineSummary] => [`prefetcher ${rank}`, p]),
    ];
    return {
      errors: errorsOf(processes),
      calls: [...writers, ...prefetchers].reduce((sum, s) => sum + s.calls, 0),
      retried: processes.reduce((sum, [, p]) => sum + p.retried, 0),
      refused: processes.reduce((sum, [, p]) => sum + p.refused, 0),
      unreached: processes.reduce((sum, [, p]) => sum + p.unreached, 0),
      ...longestOf(processes),
      stored: writers.reduce((sum, w) => sum + w.confirmed!.length, 0),
      async missing(url) {
        const missing = await Promise.all(
          writers.map(async (w, rank) => {
            const keys = w.confirmed!;
            const { exists } = await postJson<{ exists: boolean[] }>(`${url}/${rank}/exists`, { keys, namespace: "kv" });
            return keys.filter((_, i) => !exists[i]).map((key) => `rank ${rank}: ${key}`);
          }),
        );
        return missing.flat();
      },
    };
  }
}

/**
 * engines are both engines as the tests run them, each named, its readers
 * idle idleSeconds between their turns: vLLM's (a scheduler and two TP
 * workers) and SGLang's (two ranks, each a writer and a prefetcher), with
 * 65,536 pages a rank, so that no rank evicts during a test: each reader
 * checks that a key found has a page, which a key evicted between its two
 * calls would not.
 */
export function engines(idleSeconds: number): [string, (url: string) => Promise<Engine>][] {
  return [
    ["vLLM's engine (a scheduler idle between turns, two TP workers)", (url) => VllmEngine.start(url, 2, 65_536, idleSeconds)],
    ["SGLang's engine (per TP rank a writer, and a prefetcher idle between turns)", async (url) => SglangEngine.start(url, 2, 65_536, idleSeconds)],
  ];
}

const loops = new Set<PythonLoop<unknown>>();
afterEach(() => {
  for (const loop of loops) loop.kill();
  loops.clear();
});
