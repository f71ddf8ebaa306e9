import { execFileSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, readFileSync, realpathSync, symlinkSync } from "node:fs";
import { dirname, join } from "node:path";

/**
 * debianMirror is the Debian mirror this machine's apt uses for bookworm
 * (deb822 sources or sources.list), undefined when it names none: then
 * debootstrap takes its own default.
 */
export function debianMirror(): string | undefined {
  const deb822 = "/etc/apt/sources.list.d/debian.sources";
  if (existsSync(deb822)) {
    for (const stanza of readFileSync(deb822, "utf8").split(/\n\s*\n/)) {
      const field = (name: string) => new RegExp(`^${name}:\\s*(.+)$`, "m").exec(stanza)?.[1]?.trim().split(/\s+/);
      if (field("Suites")?.includes("bookworm")) return field("URIs")?.[0];
    }
  }
  const list = "/etc/apt/sources.list";
  if (existsSync(list)) return /^deb\s+(?:\[[^\]]*\]\s+)?(\S+)\s+bookworm\s/m.exec(readFileSync(list, "utf8"))?.[1];
  return undefined;
}

/**
 * makeNodeBase makes, with no container registry, a Debian 12 image with
 * this machine's Node and npm (`debootstrap --variant=minbase bookworm`,
 * the binaries copied in, `podman import`), tagged `tag`. `dir` is a
 * scratch directory, as root needs (debootstrap does).
 */
export function makeNodeBase(tag: string, dir: string): void {
  const root = join(dir, "root");
  const mirror = debianMirror();
  execFileSync("debootstrap", ["--variant=minbase", "bookworm", root, ...(mirror === undefined ? [] : [mirror])], { stdio: "pipe" });
  mkdirSync(join(root, "usr/lib/node_modules"), { recursive: true });
  cpSync(process.execPath, join(root, "usr/bin/node"));
  const npm = dirname(dirname(realpathSync(execFileSync("sh", ["-c", "command -v npm"], { encoding: "utf8" }).trim())));
  cpSync(npm, join(root, "usr/lib/node_modules/npm"), { recursive: true });
  symlinkSync("../lib/node_modules/npm/bin/npm-cli.js", join(root, "usr/bin/npm"));
  symlinkSync("../lib/node_modules/npm/bin/npx-cli.js", join(root, "usr/bin/npx"));
  execFileSync("sh", ["-c", `tar -C "${root}" -c . | podman import - "${tag}"`], { stdio: "pipe" });
}
