/** LoadProgress is reported about once a second while a long load runs (a store's load, a migration, a snapshot). */
export interface LoadProgress {
  records: number;
  /** total is the number of records the load will read in all (LMDB's entry counts, or the leader's), at least `records`. */
  total: number;
  elapsedMs: number;
  /** done is true on the last report. */
  done: boolean;
}

/**
 * ProgressReporter tells `report` how far a load is, at most every
 * everyMs as the count moves (at), and once at its end (done): the one
 * clock of every long load's progress.
 */
export class ProgressReporter {
  private readonly started = Date.now();
  private nextAt: number;
  private records = 0;

  constructor(
    private readonly report: (p: LoadProgress) => void,
    private total: number,
    private readonly everyMs = 1_000,
  ) {
    this.nextAt = this.started + everyMs;
  }

  /** at says `records` are read so far (and, when known, how many in all); it reports when a report is due. */
  at(records: number, total = this.total): void {
    this.records = records;
    this.total = total;
    const now = Date.now();
    if (now < this.nextAt) return;
    this.nextAt = now + this.everyMs;
    this.report({ records, total: Math.max(total, records), elapsedMs: now - this.started, done: false });
  }

  /** done reports the end: every record read. */
  done(): void {
    this.report({ records: this.records, total: this.records, elapsedMs: Date.now() - this.started, done: true });
  }
}

/** ProgressFields are what a log line of a long load says: how far (records of total, percent), how fast, and how long is left. */
export interface ProgressFields {
  records: number;
  total: number;
  percent: number;
  recordsPerSecond: number;
  /** secondsLeft is null until the load has a rate and a known total. */
  secondsLeft: number | null;
}

/** progressFields turns a load's progress into the fields of its log line: the store's load, a migration, a standby's snapshot and state. */
export function progressFields({ records, total, elapsedMs }: LoadProgress): ProgressFields {
  const recordsPerSecond = Math.round((records / Math.max(elapsedMs, 1)) * 1_000);
  const percent = percentOf(records, total);
  const secondsLeft = recordsPerSecond > 0 && total > 0 ? Math.max(0, Math.ceil((total - records) / recordsPerSecond)) : null;
  return { records, total, percent, recordsPerSecond, secondsLeft };
}

/** percentOf is how far `records` of `total` are, in whole percent (0 while the total is unknown). */
export function percentOf(records: number, total: number): number {
  return total > 0 ? Math.min(100, Math.floor((records / total) * 100)) : 0;
}

/** ProgressLog is where a load's progress is logged: a pino logger, or anything with its info(fields, msg). */
export interface ProgressLog {
  info(fields: ProgressFields, msg: string): void;
}

/** logProgress logs each report of a load but the last as `<what>: N%` with its fields, at info; the caller logs the end its own way. */
export function logProgress(log: ProgressLog, what: string): (p: LoadProgress) => void {
  return (progress) => {
    if (progress.done) return;
    const fields = progressFields(progress);
    log.info(fields, `${what}: ${fields.percent}%`);
  };
}

/** LoadStatus is a load under way as status and the status page show it: what loads, and how far. */
export interface LoadStatus extends ProgressFields {
  task: string;
}

/**
 * CurrentLoad is the long load a server runs now, if any (its store, its
 * standby state, a snapshot), for `status` and the status page: a load is
 * shown from its start, with each report (at 100% from its last read to its
 * end), until it ends or fails. Loads run one after another; should two
 * overlap, the one begun last is shown, and the other again once it ends.
 */
export class CurrentLoad {
  private readonly running: { status: LoadStatus; startedAt: number }[] = [];

  /** status is the load under way; undefined when none runs. */
  get status(): LoadStatus | undefined {
    return this.running.at(-1)?.status;
  }

  /** lasting is the load under way once it has run for ms: a member publishes only those, so that a load of moments is never shown after its end. */
  lasting(ms: number): LoadStatus | undefined {
    const load = this.running.at(-1);
    return load !== undefined && Date.now() - load.startedAt >= ms ? load.status : undefined;
  }

  /** track runs a load as `task`, handing `run` the reporter of its progress, which also goes to `log`. */
  async track<T>(task: string, run: (report: (p: LoadProgress) => void) => Promise<T>, log: (p: LoadProgress) => void): Promise<T> {
    const load = { status: { task, ...progressFields({ records: 0, total: 0, elapsedMs: 0, done: false }) }, startedAt: Date.now() };
    this.running.push(load);
    try {
      return await run((progress) => {
        load.status = { task, ...progressFields(progress) };
        log(progress);
      });
    } finally {
      this.running.splice(this.running.indexOf(load), 1);
    }
  }
}
