// floors.mjs: the floors of src/ and the imports between them, as a Mermaid picture, drawn from
// the import graph that `npm run lint` checks (dependency-cruiser with .dependency-cruiser.cjs).
// docs/architecture.md holds its output between the markers below; test/unit/contract keeps it so.
// Run: node .ci/floors.mjs            (prints the picture)
//      node .ci/floors.mjs --write    (puts it in docs/architecture.md)
import { execFileSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

const ROOT = new URL("..", import.meta.url).pathname;
export const BEGIN = "<!-- floors: drawn by .ci/floors.mjs -->";
export const END = "<!-- end of floors -->";

/** floors is the Mermaid flowchart of src/'s folders: an arrow for each folder that imports another. */
export function floors(root = ROOT) {
  const json = execFileSync(join(root, "node_modules/.bin/depcruise"), ["src", "--config", ".dependency-cruiser.cjs", "--output-type", "json"], {
    cwd: root,
    encoding: "utf8",
    maxBuffer: 64 << 20,
  });
  const folderOf = (path) => /^src\/([^/]+)\//.exec(path)?.[1];
  const edges = new Set();
  const folders = new Set();
  for (const module of JSON.parse(json).modules) {
    const from = folderOf(module.source);
    if (from === undefined) continue;
    folders.add(from);
    for (const dependency of module.dependencies) {
      const to = folderOf(dependency.resolved);
      if (to !== undefined && to !== from) edges.add(`${from} --> ${to}`);
    }
  }
  const lines = ["```mermaid", "flowchart TB", ...[...folders].sort().map((f) => `  ${f}[${f}/]`), ...[...edges].sort().map((e) => `  ${e}`), "```"];
  return lines.join("\n");
}

/** withFloors is the architecture page with the picture between its markers replaced by `picture`. */
export function withFloors(page, picture) {
  const start = page.indexOf(BEGIN);
  const end = page.indexOf(END);
  if (start < 0 || end < start) throw new Error(`docs/architecture.md lacks the markers ${BEGIN} ... ${END}`);
  return `${page.slice(0, start + BEGIN.length)}\n${picture}\n${page.slice(end)}`;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const picture = floors();
  if (process.argv.includes("--write")) {
    const path = join(ROOT, "docs/architecture.md");
    writeFileSync(path, withFloors(readFileSync(path, "utf8"), picture));
  } else {
    console.log(picture);
  }
}
