/**
 * OptionKind is how an option's value is written: text, a whole number, a
 * duration (500ms, 60s, 10m, 1h; read as ms), on/off, or a fraction from 0 to 1.
 */
export type OptionKind = "string" | "integer" | "duration" | "boolean" | "fraction";

/**
 * OptionSpec describes one option: how it is written, its default and its
 * bounds. How a command line names it and helps with it is the CLI's
 * (cli/flags.ts).
 */
export interface OptionSpec {
  readonly kind: OptionKind;
  /** choices are the only values a string option takes. */
  readonly choices?: readonly string[];
  /** min and max bound a number option (inclusive). */
  readonly min?: number;
  readonly max?: number;
  /** why says what a bound stands for, in the error that refuses a value past it. */
  readonly why?: string;
  readonly default: string | number | boolean;
}

/** OptionTable is the options of one concern, by field: what its consumer takes, typed by OptionsOf. */
export type OptionTable = { readonly [field: string]: OptionSpec };

/** ValueOf is the type of an option's value: one of its choices, or its kind's type. */
type ValueOf<S extends OptionSpec> = S extends { readonly choices: readonly (infer C)[] }
  ? C
  : S["kind"] extends "boolean"
    ? boolean
    : S["kind"] extends "string"
      ? string
      : number;

/** OptionsOf is the options a table describes: a field per row, of the row's type. */
export type OptionsOf<T extends OptionTable> = { -readonly [F in keyof T]: ValueOf<T[F]> };

/** optionTable types a table of options as written (its choices as literal types). */
export function optionTable<const T extends OptionTable>(table: T): T {
  return table;
}

/** defaultsOf is a table's options at their defaults. */
export function defaultsOf<T extends OptionTable>(table: T): OptionsOf<T> {
  return Object.fromEntries(Object.entries(table).map(([field, spec]) => [field, spec.default])) as OptionsOf<T>;
}

/** NameOf names an option in an error: its field for a library's caller, its flag for the command line. */
export type NameOf = (field: string) => string;

/**
 * checkBounds throws a RangeError naming the first option of `table` that
 * is not one of its choices or is past its bounds: the rules of each
 * table, written once, whoever passes the options.
 */
export function checkBounds(table: OptionTable, options: object, name: NameOf = (field) => field): void {
  const values = options as Record<string, unknown>;
  for (const [field, spec] of Object.entries(table)) {
    const value = values[field];
    if (value === undefined) continue;
    if (spec.choices !== undefined && !spec.choices.includes(value as string)) {
      const last = spec.choices[spec.choices.length - 1];
      const choices = spec.choices.length <= 2 ? spec.choices.join(" or ") : `${spec.choices.slice(0, -1).join(", ")} or ${last}`;
      throw new RangeError(`${name(field)} takes ${choices}, got "${String(value)}"`);
    }
    if (typeof value !== "number") continue;
    const why = spec.why === undefined ? "" : ` (${spec.why})`;
    if (spec.min !== undefined && value < spec.min) {
      throw new RangeError(spec.kind === "duration" && spec.min === 1 ? `${name(field)} must be longer than 0` : `${name(field)} must be at least ${spec.min}`);
    }
    if (spec.max !== undefined && value > spec.max) throw new RangeError(`${name(field)} must be at most ${spec.max}, got ${value}${why}`);
  }
}

/** definedOf drops the fields of an object that are undefined, so that spreading it over defaults keeps the defaults they leave out. */
export function definedOf<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>;
}
