import { parseArgs } from "node:util";
import type { NameOf, OptionKind, OptionSpec, OptionTable } from "../core/options.js";
import { formatDuration, parseDuration } from "./duration.js";
import { FLAGS, type Flag } from "./flags.js";

/** Option is one flag of a command: its spec (OptionSpec), its flag and help (FLAGS), and the field it sets. */
export type Option<O> = OptionSpec & Flag & { readonly field: keyof O & string };

/** CommandOptions are the options of one command (serve, relay), from its concerns' tables; the env variable of each is HF3FS_METADATA_<FLAG>. */
export class CommandOptions<O extends object> {
  /** options lists every option, in the order of the tables. */
  readonly options: readonly Option<O>[];
  private readonly byField: Map<string, Option<O>>;

  /**
   * `resolve` is the library's own resolution of the options given (e.g.
   * serverOptions): their defaults, the options derived from others, and
   * the rules, throwing naming (by its NameOf) the first option that breaks
   * one.
   */
  constructor(
    private readonly command: string,
    tables: readonly OptionTable[],
    private readonly defaults: O,
    private readonly resolve: (given: Partial<O>, name: NameOf) => O,
  ) {
    this.options = tables.flatMap((table) =>
      Object.entries(table).map(([field, spec]) => ({ ...spec, ...FLAGS[field as keyof typeof FLAGS], field: field as keyof O & string })),
    );
    this.byField = new Map(this.options.map((option) => [option.field, option]));
  }

  /** parse reads flags, then the environment, then the defaults: flags win. Throws with a readable message naming the flag. */
  parse(args: string[], env: NodeJS.ProcessEnv): O {
    const { values } = parseArgs({
      args,
      options: Object.fromEntries(this.options.map((o) => [o.flag, { type: o.kind === "boolean" ? "boolean" : "string" }])),
      strict: true,
      allowPositionals: false,
    });
    const given: Record<string, unknown> = {};
    for (const { flag, field, kind } of this.options) {
      const raw = values[flag] ?? env[envName(flag)];
      if (raw !== undefined) given[field] = convert(raw, kind, flag);
    }
    return this.resolve(given as Partial<O>, (field) => `--${this.byField.get(field)?.flag ?? field}`);
  }

  /** usage is the command's help text. */
  usage(): string {
    const lines = this.options.map((o) => {
      const value = o.kind === "boolean" ? "" : ` <${o.kind}>`;
      return `  --${o.flag}${value}\n      ${o.help} (default ${o.defaultHelp ?? defaultText(o.kind, this.defaults[o.field])}; env ${envName(o.flag)})`;
    });
    return `usage: hf3fs-metadata ${this.command} [options]\n\noptions:\n${lines.join("\n")}\n\nDurations accept 500ms, 60s, 10m, 1h.`;
  }

  /** error is a command line's error as the CLI prints it: the reason, then where the options are listed. */
  error(message: string): string {
    return `hf3fs-metadata ${this.command}: ${message} (hf3fs-metadata ${this.command} --help lists the options)`;
  }
}

/** defaultText is a default as a person reads it: durations in their unit, "none" for an empty string. */
function defaultText(kind: OptionKind, value: unknown): string {
  if (kind === "duration") return formatDuration(value as number);
  return value === "" ? "none" : String(value);
}

/** envName is the environment variable of a flag, e.g. HF3FS_METADATA_RESERVATION_TTL. */
export function envName(flag: string): string {
  return `HF3FS_METADATA_${flag.toUpperCase().replaceAll("-", "_")}`;
}

/** convert reads a flag's text as its kind. */
function convert(raw: string | boolean, kind: OptionKind, flag: string): unknown {
  if (kind === "boolean") return raw === true || raw === "true" || raw === "1";
  const text = String(raw);
  if (kind === "string") return text;
  if (kind === "duration") {
    try {
      return parseDuration(text);
    } catch (e) {
      throw new Error(`--${flag}: ${(e as Error).message}`);
    }
  }
  if (kind === "fraction") {
    if (!/^(0(\.\d+)?|1(\.0*)?|\.\d+)$/.test(text)) throw new Error(`--${flag} must be a fraction from 0 to 1, like 0.95, got "${text}"`);
    return Number(text);
  }
  if (!/^\d+$/.test(text)) throw new Error(`--${flag} must be a whole number, got "${text}"`);
  return Number(text);
}
