import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";

const ROOT = new URL("../../../", import.meta.url).pathname;

/** shebang is a file's first line. */
const shebang = (file: string) => readFileSync(`${ROOT}${file}`, "utf8").split("\n", 1)[0]!;

// The installed command (dist/src/cli/main.js, main.ts compiled) gives node its flags on its first line.
const flags = /^#!\/usr\/bin\/env -S node (.+)$/.exec(shebang("src/cli/main.ts"))?.[1];

describe("the node flags every process starts with", () => {
  it("are on the installed command's first line, and include V8's floor for the old generation", () => {
    expect(flags).toBeDefined();
    expect(flags!.split(" ")).toContain("--initial-old-space-size=64");
  });

  it("are the same for src/cli/bin.mjs and for `npm start`", () => {
    expect(shebang("src/cli/bin.mjs")).toBe(shebang("src/cli/main.ts"));
    const scripts = (JSON.parse(readFileSync(`${ROOT}package.json`, "utf8")) as { scripts: Record<string, string> }).scripts;
    expect(scripts.start).toBe(`node ${flags} src/cli/bin.mjs serve`);
  });

  it("are flags this node takes (an unknown V8 flag would stop every start)", () => {
    const run = spawnSync(process.execPath, [...flags!.split(" "), "-e", "process.stdout.write('ok')"], { encoding: "utf8" });
    expect(run.stderr).toBe("");
    expect(run.stdout).toBe("ok");
  });
});
