#!/usr/bin/env -S node --initial-old-space-size=64
// hf3fs-metadata: runs the compiled build in dist/ (`npm run build`, which `npm ci` runs), so a start
// costs no compiling; when dist/ is missing or older than a source, it runs the sources through tsx.
import { readdirSync, statSync } from "node:fs";

const root = new URL("../../", import.meta.url);
const built = new URL("dist/.built", root);

/** newestSource is the latest modification time of a file under src/ or gen/, in ms. */
function newestSource() {
  let newest = 0;
  for (const dir of ["src/", "gen/"]) {
    const base = new URL(dir, root);
    for (const name of readdirSync(base, { recursive: true })) newest = Math.max(newest, statSync(new URL(name, base)).mtimeMs);
  }
  return newest;
}

/** builtAt is when dist/ was last built, 0 when it was not. */
function builtAt() {
  try {
    return statSync(built).mtimeMs;
  } catch {
    return 0;
  }
}

if (builtAt() >= newestSource()) {
  await import(new URL("dist/src/cli/main.js", root).href);
} else {
  process.stderr.write("hf3fs-metadata: dist/ is missing or older than the sources; running them through tsx (`npm run build` makes starts faster)\n");
  const { register } = await import("tsx/esm/api");
  register();
  await import("./main.ts");
}
