// The benchmarks' command-line options, written --name=value.

/** option is the value of --name=value on the command line, or fallback. */
export function option(name: string, fallback: string): string {
  return process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? fallback;
}

/** numberOption is option as a number. */
export function numberOption(name: string, fallback: number): number {
  return Number(option(name, String(fallback)));
}
