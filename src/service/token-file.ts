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
