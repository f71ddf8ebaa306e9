// load.ts CONFIG_JSON: the load process of the benchmark. It runs the cycle
// workload against a server and prints, on stdout, "start" when the measured
// window opens, "end" when it closes, then one JSON line of results.

import { type CycleClient, cycleClient, type TransportName } from "./cycle-clients.js";
import { benchKey } from "./keys.js";
import { type LatencySummary, summarize } from "./latency.js";

export interface LoadConfig {
  url: string;
  transport: TransportName;
  /** batch is B, the keys per call. */
  batch: number;
  /** concurrency is C, the virtual workers. */
  concurrency: number;
  /** connections carry the workers' calls, round robin. */
  connections: number;
  ranks: number;
  numPages: number;
  warmupMs: number;
  durationMs: number;
  /** keyOffset makes the keys of this run differ from earlier runs on the same server. */
  keyOffset: number;
  /** cyclesPerSecond paces the workers to this many cycles a second in all; absent: as fast as they go. */
  cyclesPerSecond?: number;
}

export interface LoadResult {
  cycles: number;
  keys: number;
  elapsedMs: number;
  clientCpuMs: number;
  errors: number;
  noSpace: number;
  rpc: Record<"allocate" | "confirm" | "exists" | "locate", LatencySummary>;
}

const RPCS = ["allocate", "confirm", "exists", "locate"] as const;

async function run(config: LoadConfig): Promise<LoadResult> {
  const clients: CycleClient[] = Array.from({ length: config.connections }, () => cycleClient(config.transport, config.url));
  const namespaceOf = (rank: number) => `${config.transport}-r${rank}`;
  await Promise.all(Array.from({ length: config.ranks }, (_, r) => clients[0]!.init(namespaceOf(r), 0, config.numPages)));

  let measuring = false;
  let stop = false;
  let cycles = 0;
  let errors = 0;
  let noSpace = 0;
  const latencies: Record<(typeof RPCS)[number], number[]> = { allocate: [], confirm: [], exists: [], locate: [] };
  let next = config.keyOffset;

  const timed = async <T>(rpc: (typeof RPCS)[number], call: () => Promise<T>): Promise<T> => {
    const t0 = performance.now();
    const result = await call();
    if (measuring) latencies[rpc].push(performance.now() - t0);
    return result;
  };

  // Paced, each worker starts its cycles on a grid of its own, the workers' grids staggered.
  const every = config.cyclesPerSecond ? (1_000 * config.concurrency) / config.cyclesPerSecond : 0;
  const worker = async (w: number) => {
    const client = clients[w % clients.length]!;
    const namespace = namespaceOf(w % config.ranks);
    let due = performance.now() + (every * w) / config.concurrency;
    while (!stop) {
      if (every > 0) {
        // A cycle started late moves the grid: no run of cycles back to back to catch up, which would pass the rate.
        const wait = due - performance.now();
        if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
        else due = performance.now();
        due += every;
      }
      // A cycle counts when it started in the measured window, wherever it ends: paced, starts keep the grid's rate, while
      // ends bunch (a slow cycle's successor starts at once), and counting them passed the pace in a short window.
      const counted = measuring;
      const keys = new Array<string>(config.batch);
      const prefixKeys = new Array<string>(config.batch);
      for (let i = 0; i < config.batch; i++) {
        keys[i] = benchKey(next++, w + 1);
        prefixKeys[i] = i === 0 ? "" : keys[i - 1]!;
      }
      try {
        const pages = await timed("allocate", () => client.allocate(namespace, 0, keys, prefixKeys));
        const written = keys.filter((_, i) => pages[i]! >= 0);
        if (counted) noSpace += keys.length - written.length;
        await timed("confirm", () =>
          client.confirm(
            namespace,
            0,
            written,
            pages.filter((p) => p >= 0),
          ),
        );
        await timed("exists", () => client.exists(namespace, keys));
        await timed("locate", () => client.locate(namespace, 0, keys));
        if (counted) cycles++;
      } catch (e) {
        if (counted) errors++;
        if (errors === 1) console.error(`load: ${(e as Error).message}`);
      }
    }
  };

  const workers = Array.from({ length: config.concurrency }, (_, w) => worker(w));
  await new Promise((resolve) => setTimeout(resolve, config.warmupMs));
  measuring = true;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  process.stdout.write("start\n");
  await new Promise((resolve) => setTimeout(resolve, config.durationMs));
  measuring = false;
  const elapsedMs = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  process.stdout.write("end\n");
  stop = true;
  await Promise.all(workers);
  for (const c of clients) c.close();
  return {
    cycles,
    keys: cycles * config.batch,
    elapsedMs,
    clientCpuMs: (cpu.user + cpu.system) / 1_000,
    errors,
    noSpace,
    rpc: Object.fromEntries(RPCS.map((r) => [r, summarize(latencies[r])])) as LoadResult["rpc"],
  };
}

const config = JSON.parse(process.argv[2]!) as LoadConfig;
run(config).then(
  (result) => {
    process.stdout.write(`${JSON.stringify(result)}\n`);
    process.exit(0);
  },
  (error: Error) => {
    console.error(`load: ${error.stack}`);
    process.exit(1);
  },
);
