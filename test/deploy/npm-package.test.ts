import { execFileSync, spawnSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, dirname, join, normalize } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startInstalledCommand } from "../support/child-server.js";
import { lacking } from "../support/debian-packages.js";

// The package as a user gets it: packed from a copy of the checkout's tracked files (packing runs
// prepack, which rebuilds dist/, so never in the checkout that other test files run from), installed
// from the tarball into an empty directory, and run from there.
const ROOT = new URL("../../", import.meta.url).pathname;
const UNITS = join(ROOT, "deploy/systemd");
const work = mkdtempSync(join(tmpdir(), "hf3fs-metadata-package-"));
const app = join(work, "app");
const bin = join(app, "node_modules/.bin/hf3fs-metadata");
let packed: string[] = [];

beforeAll(() => {
  const copy = join(work, "checkout");
  for (const file of execFileSync("git", ["ls-files", "-z"], { cwd: ROOT, encoding: "utf8" }).split("\0")) {
    if (file === "" || !existsSync(join(ROOT, file))) continue;
    mkdirSync(dirname(join(copy, file)), { recursive: true });
    cpSync(join(ROOT, file), join(copy, file));
  }
  symlinkSync(join(ROOT, "node_modules"), join(copy, "node_modules"));
  const pack = JSON.parse(execFileSync("npm", ["pack", "--json", "--pack-destination", work], { cwd: copy, encoding: "utf8" })) as {
    filename: string;
    files: { path: string }[];
  }[];
  packed = pack[0]!.files.map((f) => f.path);
  mkdirSync(app);
  writeFileSync(join(app, "package.json"), JSON.stringify({ name: "app", private: true, type: "module" }));
  // --prefer-offline: every tarball comes from npm's cache (npm ci filled it); only the registry's
  // indexes of versions are fetched when the cache has none.
  execFileSync("npm", ["install", "--prefer-offline", "--no-audit", "--no-fund", join(work, pack[0]!.filename)], { cwd: app, stdio: "pipe" });
}, 240_000);

afterAll(() => rmSync(work, { recursive: true, force: true }));

describe("the npm package", () => {
  it("holds what runs and what a user reads, and no test, bench or source file", () => {
    expect(packed).toEqual(
      expect.arrayContaining(["LICENSE", "README.md", "package.json", "dist/src/cli/main.js", "dist/src/client/index.js", "dist/src/client/index.d.ts"]),
    );
    expect(packed).toEqual(expect.arrayContaining(["docs/install.md", "deploy/systemd/hf3fs-metadata.service", "deploy/container/Containerfile"]));
    // bench/ ships only what the docs quote: its README and the results it names, never a script.
    const measured = (f: string) => f === "bench/README.md" || /^bench\/results\/quoted-[^/]+\.json$/.test(f);
    const unwanted = packed.filter(
      (f) => (/^(test|bench|\.ci|src|gen)\//.test(f) && !measured(f)) || (f.endsWith(".ts") && !f.endsWith(".d.ts")) || f.endsWith(".map"),
    );
    expect(unwanted).toEqual([]);
  });

  it("links its Markdown only to files it holds", () => {
    const broken: string[] = [];
    for (const doc of packed.filter((f) => f.endsWith(".md"))) {
      const text = readFileSync(join(app, "node_modules/hf3fs-metadata", doc), "utf8");
      for (const [, target] of text.matchAll(/\]\(([^)#:\s]+)(?:#[^)]*)?\)/g)) {
        const file = normalize(join(dirname(doc), target!));
        if (!packed.includes(file)) broken.push(`${doc} -> ${target}`);
      }
    }
    expect(broken).toEqual([]);
    expect(packed).not.toContain("dist/src/cli/bin.mjs");
  });

  it("installs with no dev dependency: the command runs dist/ without tsx", () => {
    const installed = JSON.parse(readFileSync(join(app, "node_modules/hf3fs-metadata/package.json"), "utf8")) as { dependencies: Record<string, string> };
    expect(Object.keys(installed.dependencies)).not.toContain("tsx");
    expect(readdirSync(join(app, "node_modules"))).not.toEqual(expect.arrayContaining(["tsx"]));
    const version = spawnSync(bin, ["--version"], { encoding: "utf8" });
    expect(version.stdout.trim()).toBe(JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")).version);
    expect(version.stderr).toBe("");
    const relay = spawnSync(bin, ["relay", "--help"], { encoding: "utf8" });
    expect(relay.status).toBe(0);
    expect(relay.stdout).toMatch(/^usage: hf3fs-metadata relay/);
  });

  it("serves a vLLM JSON call, and a script importing hf3fs-metadata/client runs the cycle over gRPC", async () => {
    const server = await startInstalledCommand(bin, "serve", ["--in-memory"]);
    await server.logged("ready");
    // The command's first line gave node its flags (test/unit/cli/node-flags.test.ts): the running server has them.
    const argv = readFileSync(`/proc/${server.child.pid}/cmdline`, "utf8").split("\0");
    expect(argv).toContain("--initial-old-space-size=64");
    const json = async (path: string, body: unknown) => {
      const res = await fetch(`${server.url}${path}`, { method: "POST", body: JSON.stringify(body), headers: { "content-type": "application/json" } });
      return { status: res.status, body: res.status === 204 ? undefined : await res.json() };
    };
    expect(await json("/rank/0/initialize", { num_pages: 16 })).toMatchObject({ status: 200 });
    const allocated = await json("/keys/batch_allocate", { rank: 0, keys: [["v1", ""]] });
    const [[, page]] = (allocated.body as { results: [string, number][] }).results as [[string, number]];
    expect(page).toBeGreaterThanOrEqual(0);
    expect(await json("/keys/confirm_write", { rank: 0, confirmations: [["v1", page]], pages_to_release: [] })).toEqual({ status: 204, body: undefined });
    expect(await json("/keys/batch_exists", { keys: ["v1", "v2"] })).toEqual({ status: 200, body: { exists: [true, false] } });
    writeFileSync(
      join(app, "cycle.mjs"),
      `import { createMetadataClient } from "hf3fs-metadata/client";
const client = createMetadataClient({ baseUrl: process.argv[2] });
await client.initializeRank({ namespace: "app", rank: 0, numPages: 8 });
const { pages } = await client.batchAllocate({ namespace: "app", rank: 0, keys: ["k1", "k2"] });
await client.confirmWrite({ namespace: "app", rank: 0, keys: ["k1", "k2"], pages });
const { exists } = await client.batchExists({ namespace: "app", keys: ["k1", "k2", "k3"] });
const { pages: located } = await client.getLocations({ namespace: "app", rank: 0, keys: ["k1", "k3"] });
console.log(JSON.stringify({ pages, exists, located }));
`,
    );
    const cycle = spawnSync(process.execPath, ["cycle.mjs", server.url], { cwd: app, encoding: "utf8" });
    expect(cycle.stderr).toBe("");
    const out = JSON.parse(cycle.stdout) as { pages: number[]; exists: boolean[]; located: number[] };
    expect(out.exists).toEqual([true, true, false]);
    expect(out.pages).toHaveLength(2);
    expect(out.located[0]).toBe(out.pages[0]);
    server.child.kill("SIGTERM");
    expect(await server.exited).toBe(0);
  }, 60_000);

  it("runs examples/typescript/worker.ts, compiled against the installed package, on a server", async () => {
    const server = await startInstalledCommand(bin, "serve", ["--in-memory"]);
    await server.logged("ready");
    cpSync(join(ROOT, "examples/typescript/worker.ts"), join(app, "worker.ts"));
    // Node's types from the checkout: a user's project has @types/node; the installed package brings none.
    const tsc = compile(app, "worker.ts", { typeRoots: [join(ROOT, "node_modules/@types")], types: ["node"], outDir: "out" });
    expect(tsc.stdout + tsc.stderr).toBe("");
    const run = spawnSync(process.execPath, [join(app, "out/worker.js"), server.url], { cwd: app, encoding: "utf8" });
    expect(run.stderr).toBe("");
    expect(
      run.stdout
        .trim()
        .split("\n")
        .map((line) => JSON.parse(line)),
    ).toEqual([
      { written: 3, exists: [true, true, true] },
      { refused: "RESERVATION_NOT_FOUND", key: "never-allocated", page: 1_000 },
    ]);
    server.child.kill("SIGTERM");
    expect(await server.exited).toBe(0);
  }, 60_000);

  it("exports the client's types: a TypeScript user gets them checked", () => {
    writeFileSync(
      join(app, "typed.ts"),
      `import { AllocationStatus, createMetadataClient, type MetadataClient, MetadataError, Reason } from "hf3fs-metadata/client";
const client: MetadataClient = createMetadataClient({ baseUrl: "http://127.0.0.1:18000" });
// @ts-expect-error rank is a number: if the types did not resolve, this line would not be an error and tsc would fail
void client.batchAllocate({ rank: "0", keys: ["k"] });
export async function place(key: string): Promise<number | "retry" | "full"> {
  try {
    const { pages, statuses } = await client.batchAllocate({ rank: 0, keys: [key] });
    switch (statuses[0]) {
      case AllocationStatus.NEW:
      case AllocationStatus.RESERVED:
        return pages[0]!;
      case AllocationStatus.NO_SPACE:
        return "full";
      default:
        return "retry";
    }
  } catch (e) {
    if (!(e instanceof MetadataError)) throw e;
    switch (e.reason) {
      case Reason.RANK_NOT_INITIALIZED:
        return "retry";
      case Reason.RESERVATION_NOT_FOUND: {
        const page: number | undefined = e.page;
        return page ?? "retry";
      }
      default:
        throw new Error(\`\${Reason[e.reason]} on \${e.namespace ?? ""} rank \${e.rank ?? ""}: \${e.rawMessage}\`);
    }
  }
}
`,
    );
    const tsc = compile(app, "typed.ts", { noEmit: true, types: [] });
    expect(tsc.stdout + tsc.stderr).toBe("");
    expect(tsc.status).toBe(0);
  });
});

/** compile runs the checkout's tsc on one file of dir as a user's strict NodeNext project would, with `options` on top; its output and status. */
function compile(dir: string, file: string, options: Record<string, unknown>) {
  const compilerOptions = { module: "NodeNext", moduleResolution: "NodeNext", target: "ES2022", strict: true, skipLibCheck: true, ...options };
  writeFileSync(join(dir, "tsconfig.json"), JSON.stringify({ compilerOptions, files: [file] }));
  return spawnSync(process.execPath, [join(ROOT, "node_modules/typescript/bin/tsc"), "-p", dir], { encoding: "utf8" });
}

describe("the systemd units", () => {
  const units = readdirSync(UNITS).filter((f) => f.endsWith(".service"));
  const skip = lacking("the systemd units' check", "systemd");

  it.skipIf(skip !== "")("parse (systemd-analyze verify), each service with its socket, with the installed command in place of /usr/local/bin", () => {
    expect(units).toEqual(["hf3fs-metadata-relay.service", "hf3fs-metadata.service"]);
    for (const unit of units) {
      const text = readFileSync(join(UNITS, unit), "utf8");
      expect(text).toContain("ExecStart=/usr/local/bin/hf3fs-metadata ");
      const local = join(work, unit);
      writeFileSync(local, text.replaceAll("/usr/local/bin/hf3fs-metadata", bin));
      const socket = join(work, unit.replace(/\.service$/, ".socket"));
      writeFileSync(socket, readFileSync(join(UNITS, basename(socket)), "utf8"));
      const verify = spawnSync("systemd-analyze", ["verify", socket, local], { encoding: "utf8" });
      expect(verify.stderr, unit).toBe("");
      expect(verify.status, unit).toBe(0);
    }
  });

  it("take their port from a socket unit of the same name, whose ListenStream= is the address of --host and --port", () => {
    for (const unit of units) {
      const text = readFileSync(join(UNITS, unit), "utf8");
      const socket = unit.replace(/\.service$/, ".socket");
      expect(text, unit).toContain(`\nRequires=${socket}\n`);
      expect(text, unit).toContain(`\nAfter=${socket}\n`);
      const listen = /^ListenStream=(.*)$/m.exec(readFileSync(join(UNITS, socket), "utf8"))![1];
      const [host, port] = [/--host (\S+)/.exec(text)![1], /--port (\d+)/.exec(text)![1]];
      expect(listen, socket).toBe(`${host}:${port}`);
    }
  });

  it("are what docs/operating.md's restart recipe shows", () => {
    const recipe = /With systemd,\s+`deploy\/systemd\/hf3fs-metadata.service`[\s\S]*?```ini\n([\s\S]*?)```/.exec(
      readFileSync(join(ROOT, "docs/operating.md"), "utf8"),
    )![1]!;
    const unit = readFileSync(join(UNITS, "hf3fs-metadata.service"), "utf8").split("\n");
    for (const line of recipe.split("\n").filter((l) => l !== "")) expect(unit, line).toContain(line);
  });

  it("start commands the package has, with options it knows", () => {
    for (const unit of units) {
      const text = readFileSync(join(UNITS, unit), "utf8");
      const [command, verb, ...args] = /^ExecStart=(.*)$/m.exec(text)![1]!.split(/\s+/);
      expect(command).toBe("/usr/local/bin/hf3fs-metadata");
      const help = spawnSync(bin, [verb!, "--help"], { encoding: "utf8" });
      expect(help.status, unit).toBe(0);
      for (const flag of args.filter((a) => a.startsWith("--"))) expect(help.stdout, `${unit}: ${flag}`).toContain(`  ${flag} `);
      // The drain ends before systemd kills: TimeoutStopSec is longer than --shutdown-timeout.
      const drain = Number(/--shutdown-timeout (\d+)s/.exec(text)![1]);
      expect(Number(/^TimeoutStopSec=(\d+)$/m.exec(text)![1])).toBeGreaterThan(drain);
    }
  });
});
