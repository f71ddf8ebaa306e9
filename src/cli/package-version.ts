import { readFileSync } from "node:fs";

/** packageVersion is the version in this package's package.json, found by walking up from this file (it sits at a different depth in dist/ and in src/). */
export function packageVersion(): string {
  for (let dir = new URL("./", import.meta.url); dir.pathname !== "/"; dir = new URL("../", dir)) {
    try {
      const manifest = JSON.parse(readFileSync(new URL("package.json", dir), "utf8")) as { name?: string; version?: string };
      if (manifest.name === "hf3fs-metadata" && manifest.version !== undefined) return manifest.version;
    } catch {
      // no package.json at this level: keep walking up
    }
  }
  return "unknown";
}
