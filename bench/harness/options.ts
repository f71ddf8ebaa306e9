// The benchmarks' command-line options, written --name=value.

/** option is the value of --name=value on the command line, or fallback. */
export function option(name: string, fallback: string): string {
  return process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? fallback;
}

/** numberOption is option as a number. */
export function numberOption(name: string, fallback: number): number {
  return Number(option(name, String(fallback)));
}

/** choiceOption is option as one of `choices`; anything else stops the bench with the choices named. */
export function choiceOption<T extends string>(name: string, choices: readonly T[], fallback: T): T {
  const [value] = checked(name, choices, [option(name, fallback)]);
  return value!;
}

/** choicesOption is option as a comma-separated list of `choices`; anything else stops the bench with the choices named. */
export function choicesOption<T extends string>(name: string, choices: readonly T[], fallback: string): T[] {
  return checked(name, choices, option(name, fallback).split(","));
}

/** checked returns values as choices, or throws naming those that are not one. */
function checked<T extends string>(name: string, choices: readonly T[], values: string[]): T[] {
  const wrong = values.filter((v) => !(choices as readonly string[]).includes(v));
  if (wrong.length > 0) throw new Error(`--${name}: ${wrong.map((w) => JSON.stringify(w)).join(", ")} is not one of ${choices.join(", ")}`);
  return values as T[];
}
