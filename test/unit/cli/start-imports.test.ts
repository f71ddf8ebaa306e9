import { spawnSync } from "node:child_process";
import { describe, expect, it } from "vitest";

const DIST = new URL("../../../dist/src/cli/", import.meta.url).href;

// A loader hook that prints each module loaded from this repository's dist/ or from protobuf-es.
const HOOKS = `export async function load(url, context, next) {
  if (url.includes("/dist/") || url.includes("@bufbuild/protobuf")) process.stderr.write("LOADED " + url + "\\n");
  return next(url, context);
}`;
const REGISTER = `import { register } from "node:module"; register(${JSON.stringify(`data:text/javascript,${encodeURIComponent(HOOKS)}`)});`;

/** loadedBy is every module of dist/ and protobuf-es that importing `module` (of dist/src/cli/) loads: its static imports, which load before the command runs. */
function loadedBy(module: string): string[] {
  const run = spawnSync(
    process.execPath,
    ["--import", `data:text/javascript,${encodeURIComponent(REGISTER)}`, "--input-type=module", "-e", `await import(${JSON.stringify(DIST + module)});`],
    {
      encoding: "utf8",
    },
  );
  expect(run.status).toBe(0);
  return run.stderr
    .split("\n")
    .filter((line) => line.startsWith("LOADED "))
    .map((line) => line.slice("LOADED ".length).replace(/^.*\/dist\//, "dist/"));
}

describe("what a start loads before it binds its port", () => {
  // serve and relay bind their port once their options and files are read (listenEarly), so what their commands
  // import statically is what a restart makes callers wait for: no generated code, protobuf-es or state of the core.
  for (const command of ["serve-command.js", "relay-command.js"]) {
    it(`${command} imports the options' face of the core, and no generated code`, () => {
      const loaded = loadedBy(command);
      expect(loaded).toContain(`dist/src/cli/${command}`);
      expect(loaded).toContain("dist/src/core/options.js");
      expect(loaded.filter((url) => url.includes("/gen/") || url.includes("@bufbuild/protobuf") || url === "dist/src/core/index.js")).toEqual([]);
    });
  }
});
