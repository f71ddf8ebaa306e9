import { spawnSync } from "node:child_process";
import { cpSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { tempDir } from "../support/temp-dir.js";

const ROOT = new URL("../../", import.meta.url).pathname;
const DEPCRUISE = join(ROOT, "node_modules/.bin/depcruise");

/** CRUISE_MS bounds one run of the rules on a copy of src/, CPU-bound work that a busy machine stretches several times over. */
const CRUISE_MS = 180_000;

/** cruise runs the layer rules of `npm run lint` on a copy of src/ with `extra` files added, and says whether they passed and what they printed. */
function cruise(extra: Record<string, string>): { ok: boolean; output: string } {
  const dir = tempDir();
  cpSync(join(ROOT, "src"), join(dir, "src"), { recursive: true });
  cpSync(join(ROOT, "gen"), join(dir, "gen"), { recursive: true });
  cpSync(join(ROOT, "tsconfig.json"), join(dir, "tsconfig.json"));
  symlinkSync(join(ROOT, "node_modules"), join(dir, "node_modules"));
  for (const [path, text] of Object.entries(extra)) writeFileSync(join(dir, path), text);
  const run = spawnSync(DEPCRUISE, ["src", "--config", join(ROOT, ".dependency-cruiser.cjs")], { cwd: dir, encoding: "utf8" });
  return { ok: run.status === 0, output: run.stdout + run.stderr };
}

/**
 * BAD are imports each layer rule must refuse, one file each, cruised in
 * one run (depcruise reports every violation): each test names the rule
 * its files must break, and the file, so that no rule passes on another's.
 */
const BAD: Record<string, string> = {
  "src/core/bad-upward.ts": 'export { createLogger } from "../server/logger.js";\n',
  "src/service/bad-server.ts": 'export { startServer } from "../server/server.js";\n',
  "src/server/circle-a.ts": 'import { b } from "./circle-b.js";\nexport const a = () => b;\n',
  "src/server/circle-b.ts": 'import { a } from "./circle-a.js";\nexport const b = () => a;\n',
  "src/service/bad-inside.ts": 'export { Registry } from "../core/registry.js";\n',
  "src/service/bad-http2.ts": 'import * as http2 from "node:http2";\nexport const h = http2;\n',
  "src/service/bad-http.ts": 'import * as http from "http";\nexport const h = http;\n',
  "src/service/bad-framing.ts": 'export { HttpBodyReader } from "../framing/http/body-reader.js";\n',
  "src/framing/bad-server.ts": 'export { startServer } from "../server/server.js";\n',
  "src/store/bad-service.ts": 'export { Edge } from "../service/edge.js";\n',
  "src/replication/bad-server.ts": 'export { startServer } from "../server/server.js";\n',
  "src/server/bad-cli.ts": 'export { parseServerOptions } from "../cli/serve-options.js";\n',
  "src/relay/bad-cli.ts": 'export { RELAY } from "../cli/relay-command.js";\n',
  "src/server/bad-relay.ts": 'export { startRelay } from "../relay/relay.js";\n',
};

describe("the layers of src/ (npm run lint)", () => {
  let bad: { ok: boolean; output: string };
  beforeAll(() => {
    bad = cruise(BAD);
  }, CRUISE_MS);
  /** refused: the rule's violation by the file is in the cruise's report. */
  const refused = (rule: string, file: string) => expect(bad.output).toContain(`${rule}: ${file} →`);

  it(
    "hold today, and with an import through the core's public face",
    () => {
      expect(cruise({ "src/service/good-import.ts": 'export { MetadataState } from "../core/index.js";\n' })).toMatchObject({ ok: true });
    },
    CRUISE_MS,
  );

  it("fail the lint when the core imports a layer above it, the service the process, or a circle closes", () => {
    expect(bad.ok).toBe(false);
    refused("core-is-pure", "src/core/bad-upward.ts");
    refused("service-below-server", "src/service/bad-server.ts");
    expect(bad.output).toMatch(/no-circles: src\/server\/circle-[ab]\.ts →/);
  });

  it("fail the lint when a layer above the core skips its public face (core/index.ts)", () => {
    refused("core-has-one-face", "src/service/bad-inside.ts");
  });

  it("fail the lint when the service reads the wire itself or a framing reaches the process", () => {
    refused("service-knows-no-http", "src/service/bad-http2.ts");
    refused("service-knows-no-http", "src/service/bad-http.ts");
    refused("service-below-server", "src/service/bad-framing.ts");
    refused("framing-below-server", "src/framing/bad-server.ts");
  });

  it("fail the lint when the store, replication or the server reach above them", () => {
    refused("store-below-service", "src/store/bad-service.ts");
    refused("replication-below-server", "src/replication/bad-server.ts");
    refused("server-below-cli", "src/server/bad-cli.ts");
  });

  it("fail the lint when the relay reaches the CLI, or a layer below reaches the relay", () => {
    refused("relay-below-cli", "src/relay/bad-cli.ts");
    refused("relay-on-top", "src/server/bad-relay.ts");
  });
});
