import { parseArgs } from "node:util";
import type { OptionKind, OptionSpec } from "../core/option-table.js";
import { defaultServerOptions, OPTION_GROUPS, resolveServerOptions, type ServerOptions } from "../server/server-options.js";
import { parseDuration } from "./duration.js";

export { defaultServerOptions, type ServerOptions };

/** Option is one flag of `serve`: its spec (OptionSpec) and the field it sets. */
export type Option = OptionSpec & { readonly field: keyof ServerOptions };

/** OPTIONS lists every option of `serve`, by concern (OPTION_GROUPS). The env variable is HF3FS_METADATA_<FLAG>. */
export const OPTIONS: readonly Option[] = OPTION_GROUPS.flatMap(({ table }) =>
  Object.entries(table).map(([field, spec]) => ({ ...spec, field: field as keyof ServerOptions })),
);

const BY_FIELD = new Map(OPTIONS.map((option) => [option.field as string, option]));

/** flagOf names an option as the command line does, so that every rule's error names the flag. */
const flagOf = (field: string) => `--${BY_FIELD.get(field)?.flag ?? field}`;

/** envName is the environment variable of a flag, e.g. HF3FS_METADATA_RESERVATION_TTL. */
export function envName(flag: string): string {
  return `HF3FS_METADATA_${flag.toUpperCase().replaceAll("-", "_")}`;
}

/** parseServerOptions reads flags, then the environment, then the defaults: flags win. Throws with a readable message naming the flag. */
export function parseServerOptions(args: string[], env: NodeJS.ProcessEnv): ServerOptions {
  const { values } = parseArgs({
    args,
    options: Object.fromEntries(OPTIONS.map((o) => [o.flag, { type: o.kind === "boolean" ? "boolean" : "string" }])),
    strict: true,
    allowPositionals: false,
  });
  const options: Record<string, unknown> = { ...defaultServerOptions };
  const given = new Set<string>();
  for (const { flag, field, kind } of OPTIONS) {
    const raw = values[flag] ?? env[envName(flag)];
    if (raw === undefined) continue;
    options[field] = convert(raw, kind, flag);
    given.add(field);
  }
  return resolveServerOptions(options as unknown as ServerOptions, given, flagOf);
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

/** usage is the help text of `serve`. */
export function usage(): string {
  const lines = OPTIONS.map((o) => {
    const value = o.kind === "boolean" ? "" : ` <${o.kind}>`;
    const fallback = defaultServerOptions[o.field];
    return `  --${o.flag}${value}\n      ${o.help} (default ${String(fallback)}; env ${envName(o.flag)})`;
  });
  return `usage: hf3fs-metadata serve [options]\n\noptions:\n${lines.join("\n")}\n\nDurations accept 500ms, 60s, 10m, 1h; defaults in ms.`;
}
