import { readFileSync } from "node:fs";

/** readTokens reads a token file: one token per line; blank lines and lines starting with # are ignored. */
export function readTokens(file: string): string[] {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (error) {
    throw new Error(`cannot read the token file ${file}: ${(error as Error).message}`);
  }
  const tokens = text
    .split(/\r?\n/)
    .map((line) => line.trim())
    .filter((line) => line !== "" && !line.startsWith("#"));
  if (tokens.length === 0) throw new Error(`the token file ${file} holds no token`);
  return tokens;
}

/** AccessFiles name the token files of an AccessPolicy; at least one is given. */
export interface AccessFiles {
  /** workerTokenFile holds the tokens every call needs; undefined: the calls that are not admin calls are open. */
  readonly workerTokenFile?: string;
  /** adminTokenFile holds the tokens the ADMIN_METHODS need (they may do everything); undefined: a worker token may do everything. */
  readonly adminTokenFile?: string;
  /** clearTokenFile holds tokens that may make every worker call and the CLEAR_METHODS, never another admin call; undefined: none. */
  readonly clearTokenFile?: string;
}

/** AccessTokens are the tokens read from AccessFiles, by kind (none for a file not given). */
export interface AccessTokens {
  readonly worker: readonly string[];
  readonly admin: readonly string[];
  readonly clear: readonly string[];
}

/** readAccessTokens reads every token file given; throws naming a file that cannot be read or holds no token. */
export function readAccessTokens(files: AccessFiles): AccessTokens {
  const read = (file: string | undefined) => (file === undefined ? [] : readTokens(file));
  return { worker: read(files.workerTokenFile), admin: read(files.adminTokenFile), clear: read(files.clearTokenFile) };
}
