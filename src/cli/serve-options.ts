import { defaultServerOptions, OPTION_GROUPS, type ServerOptions, serverOptions } from "../server/server-options.js";
import { CommandOptions, envName, type Option } from "./command-options.js";

export { defaultServerOptions, envName, type ServerOptions };

/** SERVE is the options of `serve`, by concern (OPTION_GROUPS). */
const SERVE = new CommandOptions(
  "serve",
  OPTION_GROUPS.map(({ table }) => table),
  defaultServerOptions,
  serverOptions,
);

/** OPTIONS lists every option of `serve`. */
export const OPTIONS: readonly Option<ServerOptions>[] = SERVE.options;

/** parseServerOptions reads flags, then the environment, then the defaults: flags win. Throws with a readable message naming the flag. */
export function parseServerOptions(args: string[], env: NodeJS.ProcessEnv): ServerOptions {
  return SERVE.parse(args, env);
}

/** usageError is a bad command line's message: the reason, and where the options are listed. */
export function usageError(message: string): string {
  return SERVE.error(message);
}

/** usage is the help text of `serve`. */
export function usage(): string {
  return SERVE.usage();
}
